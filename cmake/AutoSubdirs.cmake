# Adds every direct subdirectory of the current source directory that has a CMakeLists.txt,
# in sorted order, so new components do not need to edit a shared list.
macro(longhaul_add_all_subdirectories)
  file(GLOB _lh_children RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT _lh_children)
  foreach(_lh_child IN LISTS _lh_children)
    if(IS_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${_lh_child}
       AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${_lh_child}/CMakeLists.txt)
      add_subdirectory(${_lh_child})
    endif()
  endforeach()
endmacro()
