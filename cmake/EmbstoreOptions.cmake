# One INTERFACE target carries the language standard, warnings and sanitizers; every embstore
# target links it instead of relying on global flags.
add_library(embstore_options INTERFACE)
add_library(embstore::options ALIAS embstore_options)
target_compile_features(embstore_options INTERFACE cxx_std_20)
set(CMAKE_CXX_EXTENSIONS OFF)
target_compile_options(embstore_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wimplicit-fallthrough
  $<$<BOOL:${EMBSTORE_WERROR}>:-Werror>
  # GCC 12 at -O3 reports -Wrestrict on std::string concatenation inside libstdc++ itself
  # (GCC bug 105329), a false positive that would break Release builds under -Werror.
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)
if(EMBSTORE_SANITIZE)
  target_compile_options(embstore_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(embstore_options INTERFACE -fsanitize=address,undefined)
endif()

# embstore_add_gtest(NAME SOURCES... LIBS ...): a GoogleTest binary registered with ctest.
function(embstore_add_gtest name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} embstore::testkit GTest::gtest GTest::gtest_main
                        embstore::options)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
endfunction()
