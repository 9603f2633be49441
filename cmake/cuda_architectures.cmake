# Which GPUs libconv is built for: sets CMAKE_CUDA_ARCHITECTURES before enable_language(CUDA).
#
# Every architecture multiplies the build's time and the library's size (each kernel is compiled once
# per architecture), so the default builds only what the machine can use:
#   CMAKE_CUDA_ARCHITECTURES given (-D..., or CMAKE_ARGS through pip)   used as given
#   CONV_CUDA_ARCHITECTURES (PYCONV_CUDA_ARCHITECTURES through pip):
#     auto (default)  the GPUs this machine has (nvidia-smi), a Hopper (compute capability 9.0) as 90a-real
#                     so that the wgmma / TMA configurations are built; with no GPU visible,
#                     CONV_NO_GPU_ARCHITECTURES below
#     all             CONV_ALL_ARCHITECTURES below: what wheel builders and CI build
#     anything else   a list as CMAKE_CUDA_ARCHITECTURES takes it, e.g. "80-real;90a-real"
# A library used on a GPU it holds no code for refuses GPU calls with CONV_ERR_NO_DEVICE and a message
# that names the GPU's architecture and the ones built (conv_device_built_for in device_runtime.cu).

# Turing .. Hopper as machine code (CUDA 13 dropped Volta), and PTX of Hopper for later GPUs. Hopper's
# machine code is sm_90a (sm_90 plus wgmma; it runs on compute capability 9.0 only).
set(CONV_ALL_ARCHITECTURES 75-real 80-real 86-real 89-real 90a-real 90-virtual)
# Without a GPU to ask: the Hopper GPUs (H100, H200) the kernels are tuned on.
set(CONV_NO_GPU_ARCHITECTURES 90a-real)

set(CONV_CUDA_ARCHITECTURES "auto" CACHE STRING "GPUs to build for: auto, all, or a CMAKE_CUDA_ARCHITECTURES list")

function(conv_detect_gpu_architectures out)
  set(found "")
  find_program(CONV_NVIDIA_SMI nvidia-smi)
  if(CONV_NVIDIA_SMI)
    execute_process(COMMAND ${CONV_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND caps)
      string(REPLACE "\n" ";" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REGEX REPLACE "[^0-9]" "" cap "${cap}")
        if(cap STREQUAL "90")
          list(APPEND found 90a-real)
        elseif(cap MATCHES "^[0-9]+$")
          list(APPEND found ${cap}-real)
        endif()
      endforeach()
      list(REMOVE_DUPLICATES found)
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  if(CONV_CUDA_ARCHITECTURES STREQUAL "all")
    set(archs ${CONV_ALL_ARCHITECTURES})
    set(why "all (CONV_CUDA_ARCHITECTURES)")
  elseif(CONV_CUDA_ARCHITECTURES STREQUAL "auto" OR CONV_CUDA_ARCHITECTURES STREQUAL "")
    conv_detect_gpu_architectures(archs)
    set(why "this machine's GPUs")
    if(NOT archs)
      set(archs ${CONV_NO_GPU_ARCHITECTURES})
      set(why "no GPU found on this machine; PYCONV_CUDA_ARCHITECTURES=all or a list builds for others")
    endif()
  else()
    string(REPLACE " " ";" archs "${CONV_CUDA_ARCHITECTURES}")
    string(REPLACE "," ";" archs "${archs}")
    set(why "CONV_CUDA_ARCHITECTURES")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES ${archs})
else()
  set(why "CMAKE_CUDA_ARCHITECTURES")
endif()
message(STATUS "libconv: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES} (${why})")
