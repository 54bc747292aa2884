# cmake -DDIR=assets -DOUT=file.cc -P embed_assets.cmake
# Writes a C++ source defining tokenmill::console::embedded_files(): every
# file of DIR (by name, sorted) with its bytes. Bytes as hex literals keep
# the output independent of the files' encoding and of string-length limits.
file(GLOB names LIST_DIRECTORIES false RELATIVE ${DIR} ${DIR}/*)
list(SORT names)
set(out "// Generated from src/console/assets/ by src/console/embed_assets.cmake: do not edit.\n")
string(APPEND out "#include \"console/console_assets.h\"\n\nnamespace tokenmill::console {\nnamespace {\n\n")
set(table "")
set(i 0)
foreach(name ${names})
  file(READ ${DIR}/${name} hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  # A line break every 32 bytes keeps the generated file readable.
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
  string(APPEND out "// ${name}\nconst unsigned char kFile${i}[] = {\n${bytes}0};\n\n")
  string(APPEND table "    {\"${name}\", {reinterpret_cast<const char*>(kFile${i}), ${size}}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND out "const EmbeddedFile kFiles[] = {\n${table}};\n\n}  // namespace\n\n")
string(APPEND out "std::span<const EmbeddedFile> embedded_files() { return kFiles; }\n\n}  // namespace tokenmill::console\n")
# Written only when it changed, so that an unchanged console rebuilds nothing.
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL out)
  file(WRITE ${OUT} "${out}")
endif()
