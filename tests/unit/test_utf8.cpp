// The one UTF-8 decoder (core/utf8.h) under its three policies for invalid bytes: what the text metrics, the
// WordPiece tokenizer and the corpus hygiene each did with their own decoder before it was shared.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

using daei::decode_utf8;
using daei::InvalidUtf8;

namespace {

const char32_t kRepl = 0xFFFD;

std::u32string replace_each(const std::string& s) { return decode_utf8(s, InvalidUtf8::kReplaceEachByte); }
std::u32string drop(const std::string& s) { return decode_utf8(s, InvalidUtf8::kDrop); }

}  // namespace

TEST(Utf8, ValidTextDecodesAlikeUnderEveryPolicy) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";  // 1- to 4-byte forms, U+10FFFF
  const std::u32string want = {U'a', 0xE9, 0x20AC, 0x1F600, 0x10FFFF};
  EXPECT_EQ(replace_each(s), want);
  EXPECT_EQ(drop(s), want);
  std::u32string out;
  EXPECT_TRUE(decode_utf8(s, InvalidUtf8::kStop, &out));
  EXPECT_EQ(out, want);
  EXPECT_TRUE(daei::valid_utf8(s));
}

TEST(Utf8, ReplaceEachByteGivesOneReplacementPerInvalidByte) {
  EXPECT_EQ(replace_each("\xC0\xAF"), (std::u32string{kRepl, kRepl}));             // overlong
  EXPECT_EQ(replace_each("\xED\xA0\x80"), (std::u32string{kRepl, kRepl, kRepl}));  // surrogate
  EXPECT_EQ(replace_each("\xE2\x82x"), (std::u32string{kRepl, kRepl, U'x'}));       // truncated, then ASCII
  EXPECT_EQ(replace_each("\xF4\x90\x80\x80"), std::u32string(4, kRepl));           // above U+10FFFF
  EXPECT_EQ(replace_each("\x80\xFF"), (std::u32string{kRepl, kRepl}));              // stray bytes
}

TEST(Utf8, DropRemovesTheSequenceAndTheContinuationBytesReadWithIt) {
  EXPECT_EQ(drop("he\xffllo\xc3"), U"hello");
  EXPECT_EQ(drop("\xE2\x82x"), U"x");                      // lead + continuation dropped together
  EXPECT_EQ(drop("\xED\xA0\x80y"), U"y");                  // surrogate: all three bytes
  EXPECT_EQ(drop("\xC0\xAFz"), U"z");                      // C0 is no lead byte, AF a stray continuation
  EXPECT_EQ(drop("\xE2\x82\xC3\xA9"), (std::u32string{0xE9}));  // the next lead byte starts afresh
}

TEST(Utf8, StopReportsInvalidText) {
  for (const std::string& s : {std::string("bad \xc3"), std::string("bad \xc0\xaf"), std::string("bad \xed\xa0\x80"),
                               std::string("bad \xff"), std::string("\xF4\x90\x80\x80")}) {
    EXPECT_FALSE(daei::valid_utf8(s)) << s;
    EXPECT_FALSE(decode_utf8(s, InvalidUtf8::kReplaceEachByte, nullptr)) << s;  // every policy reports it
  }
  EXPECT_TRUE(daei::valid_utf8(""));
}

TEST(Utf8, InRangesFindsMembersOfSortedRanges) {
  static const daei::CodePointRange r[] = {{0x10, 0x20}, {0x30, 0x30}, {0x100, 0x1FF}};
  for (char32_t c : {0x10, 0x15, 0x20, 0x30, 0x100, 0x1FF}) EXPECT_TRUE(daei::in_ranges(r, c)) << c;
  for (char32_t c : {0x0, 0xF, 0x21, 0x2F, 0x31, 0xFF, 0x200}) EXPECT_FALSE(daei::in_ranges(r, c)) << c;
}
