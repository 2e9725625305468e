// Unicode character classes from the generated unicode_tables.inc, for code outside the WordPiece tokenizer that
// needs the same Python semantics (the text metrics' \s). Defined in tokenizer_wordpiece.cpp, beside the tables,
// so that each table exists once.
#pragma once

namespace daei {

// Python str.isspace(), i.e. what str.split() and `re`'s \s split on, for any code point.
bool is_python_space(char32_t c);

}  // namespace daei
