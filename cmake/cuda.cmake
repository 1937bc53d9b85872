# The CUDA toolkit, when SYNCOPATE_WITH_CUDA asks for it and one is found: sets
# SYNCOPATE_HAVE_CUDA, and SYNCOPATE_NCCL_INCLUDE / SYNCOPATE_NCCL_LIBRARY when NCCL is there.
# CMAKE_CUDA_ARCHITECTURES defaults to 80;90 (A100, H100/H200).
set(SYNCOPATE_HAVE_CUDA OFF)
if(SYNCOPATE_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Before enable_language, which would otherwise pick the compiler's default.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(SYNCOPATE_HAVE_CUDA ON)
      # CMake < 3.26 does not know nvcc's C++20 flag (nvcc >= 12 supports it): teach it.
      if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND
         CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
        list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      endif()
      # NCCL is optional: the toolkit may ship it (/usr/local/cuda/include/nccl.h) or not.
      find_path(SYNCOPATE_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      find_library(SYNCOPATE_NCCL_LIBRARY nccl
        HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
      message(STATUS "syncopate: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                     "NCCL ${SYNCOPATE_NCCL_LIBRARY}")
    endif()
  endif()
endif()
message(STATUS "syncopate: CUDA backend ${SYNCOPATE_HAVE_CUDA}")
