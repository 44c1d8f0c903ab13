# Warnings for our own targets (plexus_target_options), sanitizers for everything.
add_library(plexus_options INTERFACE)
target_compile_options(plexus_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
    -Wno-missing-field-initializers>)
if(PLEXUS_WERROR)
  target_compile_options(plexus_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
target_include_directories(plexus_options INTERFACE ${PROJECT_SOURCE_DIR})

if(PLEXUS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's uninitialized-use analysis sees through the sanitizers' instrumentation badly
    # (false reports inside libstdc++'s <regex> at -O1); the plain build keeps the warning.
    target_compile_options(plexus_options INTERFACE
      $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  endif()
endif()

if(PLEXUS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PLEXUS_FUZZ needs clang (CC=clang CXX=clang++): libFuzzer is part of it")
  endif()
  # Coverage for the fuzzer in every library the targets link, plus ASan and UBSan.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

function(plexus_target_options target)
  target_link_libraries(${target} PRIVATE plexus_options)
endfunction()
