"""A CPU stand-in for the part of PyTorch that check-real-nccl's ranks use, so that its
worker code runs without a GPU (check_real_nccl_test.py): tensors are lists, one GPU is
"available", and torch.distributed's all_reduce goes through files next to the
file:// store (distributed.py). Correct values, no speed: for tests only."""
import operator

__version__ = "0.0-standin"


class version:  # noqa: N801
    cuda = "13.0"


class dtype:  # noqa: N801
    def __init__(self, name, cast):
        self.name, self.cast = name, cast


float32 = dtype("float32", float)
float64 = dtype("float64", float)
int32 = dtype("int32", int)


class device:  # noqa: N801
    def __init__(self, kind, index=0):
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, values, dt):
        self.values, self.dtype = list(values), dt

    def _binary(self, other, op):
        if isinstance(other, Tensor):
            return Tensor([op(a, b) for a, b in zip(self.values, other.values)], self.dtype)
        return Tensor([op(a, other) for a in self.values], self.dtype)

    def __add__(self, other):
        return self._binary(other, operator.add)

    def __mul__(self, other):
        return self._binary(other, operator.mul)

    def __mod__(self, other):
        return self._binary(other, operator.mod)

    def __ne__(self, other):
        return self._binary(other, lambda a, b: a != b)

    def __iadd__(self, other):
        self.values = (self + other).values
        return self

    def to(self, dt):
        return Tensor([dt.cast(v) for v in self.values], dt)

    def sum(self):
        return Tensor([sum(self.values)], self.dtype)

    def item(self):
        assert len(self.values) == 1, "item() of a tensor with more than one element"
        return self.values[0]


def _make(n, value, dt, device):
    assert device is not None and device.type == "cuda", "tensors are made on the GPU"
    return Tensor([dt.cast(value)] * n, dt)


def zeros(n, dtype=float32, device=None):
    return _make(n, 0, dtype, device)


def ones(n, dtype=float32, device=None):
    return _make(n, 1, dtype, device)


def tensor(values, dtype=float32, device=None):
    assert device is not None
    return Tensor([dtype.cast(v) for v in values], dtype)


def arange(n, dtype=int32, device=None):
    assert device is not None
    return Tensor(range(n), dtype)


class _Nccl:
    @staticmethod
    def version():
        return (2, 30, 7)


class cuda:  # noqa: N801
    nccl = _Nccl

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def get_device_name(index=0):
        return "Stand-in GPU"

    @staticmethod
    def set_device(index):
        assert index == 0

    @staticmethod
    def synchronize():
        pass
