// Status helpers: absl::Status / absl::StatusOr are the error type of every fallible
// boundary in transport/ and tuner/. These macros propagate them without exceptions.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LH_STATUS_CONCAT_INNER_(a, b) a##b
#define LH_STATUS_CONCAT_(a, b) LH_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define LH_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status lh_status_ = (expr);          \
    if (!lh_status_.ok()) return lh_status_;     \
  } while (0)

// `lhs = value-of(rexpr)` where rexpr is an absl::StatusOr<T>; returns its status on error.
#define LH_ASSIGN_OR_RETURN(lhs, rexpr) \
  LH_ASSIGN_OR_RETURN_IMPL_(LH_STATUS_CONCAT_(lh_statusor_, __LINE__), lhs, rexpr)
#define LH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
