# The third-party packages, each only where a component needs it: the system's (Debian), or the
# copies in SYNCOPATE_VENDOR_DIR (written by `scripts/device_check.sh vendor` for a machine that
# has CUDA but none of the Debian packages). Either way the same imported targets exist:
#   Eigen3::Eigen ZLIB::ZLIB tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json
#   CLI11::CLI11                                                        core and app
#   GTest::gtest GTest::gtest_main                                      SYNCOPATE_WITH_TESTS
#   benchmark::benchmark                                                SYNCOPATE_WITH_BENCH
#   PkgConfig::SIMGRID  MPI::MPI_CXX                                    SYNCOPATE_WITH_SIM, _MPI

# An imported target for headers (and optionally one shared library) in the vendored copy.
function(syncopate_vendored_target name include_dir)
  cmake_parse_arguments(V "" "LIBRARY" "DEFINITIONS" ${ARGN})
  if(V_LIBRARY)
    add_library(${name} SHARED IMPORTED GLOBAL)
    set_target_properties(${name} PROPERTIES IMPORTED_LOCATION ${V_LIBRARY})
  else()
    add_library(${name} INTERFACE IMPORTED GLOBAL)
  endif()
  set_target_properties(${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${include_dir})
  if(V_DEFINITIONS)
    set_target_properties(${name} PROPERTIES INTERFACE_COMPILE_DEFINITIONS "${V_DEFINITIONS}")
  endif()
endfunction()

# Macros, not functions: find_package's results must reach the caller's scope.
macro(syncopate_vendored_dependencies)
  set(_vendor ${SYNCOPATE_VENDOR_DIR})
  if(NOT EXISTS ${_vendor}/eigen3)
    message(FATAL_ERROR "SYNCOPATE_VENDOR_DIR=${_vendor} has no eigen3/: run scripts/device_check.sh vendor")
  endif()
  message(STATUS "syncopate: third-party code from ${_vendor}")
  syncopate_vendored_target(Eigen3::Eigen ${_vendor}/eigen3)
  # toml++ compiled once, as the system build links Debian's library. Header-only, GCC 12 warns
  # (-Warray-bounds, an error here) in its printer where app/check.cpp inlines it.
  add_library(syncopate_vendored_toml STATIC ${PROJECT_SOURCE_DIR}/cmake/vendored_toml.cpp)
  target_include_directories(syncopate_vendored_toml SYSTEM PUBLIC ${_vendor}/include)
  target_compile_definitions(syncopate_vendored_toml PUBLIC TOML_HEADER_ONLY=0)
  set_target_properties(syncopate_vendored_toml PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_library(tomlplusplus::tomlplusplus ALIAS syncopate_vendored_toml)
  syncopate_vendored_target(CLI11::CLI11 ${_vendor}/include)
  syncopate_vendored_target(nlohmann_json::nlohmann_json ${_vendor}/include)
  # zlib: the machine's library if it has one (its headers may be missing), else the copy.
  find_library(SYNCOPATE_ZLIB_LIBRARY NAMES z libz.so.1 PATHS ${_vendor}/lib)
  syncopate_vendored_target(ZLIB::ZLIB ${_vendor}/include LIBRARY ${SYNCOPATE_ZLIB_LIBRARY})
  if(SYNCOPATE_WITH_BENCH)
    find_package(Threads REQUIRED)
    find_library(SYNCOPATE_BENCHMARK_LIBRARY NAMES benchmark libbenchmark.so.1debian
      PATHS ${_vendor}/lib NO_DEFAULT_PATH REQUIRED)
    syncopate_vendored_target(benchmark::benchmark ${_vendor}/include
      LIBRARY ${SYNCOPATE_BENCHMARK_LIBRARY})
    set_target_properties(benchmark::benchmark PROPERTIES INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
  if(SYNCOPATE_WITH_TESTS)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory(${_vendor}/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
    # Its headers as system headers, as Debian's are: our warnings are not theirs.
    foreach(t gtest gtest_main)
      get_target_property(dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
      set_target_properties(${t} PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${dirs}")
    endforeach()
    if(NOT TARGET GTest::gtest)  # googletest >= 1.11 defines them itself
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
  endif()
endmacro()

macro(syncopate_system_dependencies)
  find_package(Eigen3 3.3 REQUIRED NO_MODULE)
  find_package(ZLIB REQUIRED)
  find_package(tomlplusplus QUIET)
  if(NOT tomlplusplus_FOUND)
    find_package(PkgConfig REQUIRED)
    pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET GLOBAL tomlplusplus)
    add_library(tomlplusplus::tomlplusplus ALIAS PkgConfig::TOMLPP)
  endif()
  find_package(CLI11 CONFIG REQUIRED)
  find_package(nlohmann_json 3 REQUIRED)
  if(SYNCOPATE_WITH_TESTS)
    find_package(GTest REQUIRED)
  endif()
  if(SYNCOPATE_WITH_BENCH)
    find_package(benchmark REQUIRED)
  endif()
endmacro()
