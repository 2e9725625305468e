// The gcide corpus source (read_gcide, Debian dict-gcide): a small dictionary of real-looking entries written here
// as the package has them (gcide.index in dictd's base64, gcide.dict.dz gzip-compressed), the exact sentences it
// gives, and clean errors for missing, damaged and truncated files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../support/error_of.h"
#include "../support/temp_dir.h"
#include "core/error.h"
#include "data/corpus.h"

using namespace daei;
namespace fs = std::filesystem;
using test::error_of;

namespace {

// Entries copied from GCIDE 0.48 (gcide.dict.dz), cut down; "Cafe" stands for the entries written with GCIDE's
// character markup ("caf['e]"), whose sentences are left out.
const std::vector<std::pair<std::string, std::string>> kEntries = {
    {"00-database-info", "00-database-info\n   This file was converted from the original database on:\n"
                         "             Tue Feb 15 10:31:36 2022\n\n"},
    {"Abdication",
     "Abdication \\Ab`di*ca\"tion\\, n. [L. abdicatio: cf. F.\n"
     "   abdication.]\n"
     "   The act of abdicating; the renunciation of a high office,\n"
     "   dignity, or trust, by its holder; commonly the voluntary\n"
     "   renunciation of sovereign power; as, abdication of the\n"
     "   throne, government, power, authority.\n"
     "   [1913 Webster]\n\n"},
    {"Abdominal",
     "Abdominal \\Ab*dom\"i*nal\\, a. [Cf. F. abdominal.]\n"
     "   1. Of or pertaining to the abdomen; ventral; as, the\n"
     "      abdominal regions, muscles, cavity.\n"
     "      [1913 Webster]\n\n"
     "   2. (Zool.) Having abdominal fins; belonging to the\n"
     "      Abdominales; as, abdominal fishes.\n"
     "      [1913 Webster]\n\n"
     "   {Abdominal ring} (Anat.), a fancied ringlike opening on each\n"
     "      side of the abdomen, external and superior to the pubes;\n"
     "      -- called also {inguinal ring}.\n"
     "      [1913 Webster]\n\n"},
    {"Abdominous",
     "Abdominous \\Ab*dom\"i*nous\\, a.\n"
     "   Having a protuberant belly; pot-bellied.\n"
     "   [1913 Webster]\n\n"
     "         Gorgonius sits, abdominous and wan,\n"
     "         Like a fat squab upon a Chinese fan.     --Cowper.\n"
     "   [1913 Webster]\n\n"},
    {"abducens",
     "abducens \\abducens\\ n.\n"
     "   1. a small motor nerve supplying the lateral rectus muscle of\n"
     "      the eye.\n\n"
     "   Syn: abducent, abducent nerve, nervus abducens, sixth cranial\n"
     "        nerve\n"
     "        [WordNet 1.5]\n\n"},
    {"Abduce",
     "Abduce \\Ab*duce\"\\, v. t. [imp. & p. p. {Abduced}; p. pr. & vb.\n"
     "   n. {Abducing}.] [L. abducere to lead away; ab + ducere to\n"
     "   lead. See {Duke}, and cf. {Abduct}.]\n"
     "   To draw or conduct away; to withdraw; to draw to a different\n"
     "   part. [Obs.]\n"
     "   [1913 Webster]\n\n"
     "         If we abduce the eye unto either corner, the object\n"
     "         will not duplicate.                      --Sir T.\n"
     "                                                  Browne.\n"
     "   [1913 Webster]\n\n"},
    {"Abed",
     "Abed \\A*bed\"\\, adv. [Pref. a- in, on + bed.]\n"
     "   1. In bed, or on the bed.\n"
     "      [1913 Webster]\n\n"
     "            Not to be abed after midnight.        --Shak.\n"
     "      [1913 Webster]\n\n"
     "   2. To childbed (in the phrase \"brought abed,\" that is,\n"
     "      delivered of a child). --Shak.\n"
     "      [1913 Webster]\n\n"},
    {"Abandon",
     "Abandon \\A*ban\"don\\, v. t.\n"
     "   To give up absolutely; to forsake entirely.\n"
     "   [1913 Webster]\n\n"
     "   Syn: To give up; yield; forego; cede; surrender.\n\n"
     "   Usage: {To Abandon}, {Desert}, {Forsake}. These words agree\n"
     "          in representing a person as giving up or leaving some\n"
     "          object. See {Forsake}.\n"
     "          [1913 Webster]\n\n"},
    {"Cafe",
     "Cafe \\Caf`e\"\\, n. [F.]\n"
     "   A coffee house; a restaurant.\n"
     "   [1913 Webster]\n\n"
     "         We dined at the caf['e] by the river.     --Anon.\n"
     "   [1913 Webster]\n\n"},
};

const std::vector<std::string> kSentences = {
    "The act of abdicating; the renunciation of a high office, dignity, or trust, by its holder; commonly the "
    "voluntary renunciation of sovereign power; as, abdication of the throne, government, power, authority.",
    "Of or pertaining to the abdomen; ventral; as, the abdominal regions, muscles, cavity.",
    "Having abdominal fins; belonging to the Abdominales; as, abdominal fishes.",
    "Abdominal ring, a fancied ringlike opening on each side of the abdomen, external and superior to the pubes; "
    "called also inguinal ring.",
    "Having a protuberant belly; pot-bellied.",
    "Gorgonius sits, abdominous and wan, Like a fat squab upon a Chinese fan.",
    "To draw or conduct away; to withdraw; to draw to a different part.",
    "If we abduce the eye unto either corner, the object will not duplicate.",
    "In bed, or on the bed.",
    "Not to be abed after midnight.",
    "To childbed (in the phrase \"brought abed,\" that is, delivered of a child).",
    "To give up absolutely; to forsake entirely.",
    "These words agree in representing a person as giving up or leaving some object.",
    "A coffee house; a restaurant.",
};

std::string dictd_b64(uint64_t v) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  do {
    s.insert(s.begin(), digits[v % 64]);
    v /= 64;
  } while (v);
  return s;
}

void write_gz(const fs::path& p, const std::string& data) {
  gzFile f = gzopen(p.c_str(), "wb9");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, data.data(), unsigned(data.size())), int(data.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// DIR/gcide.index (sorted by headword, as dictd's are) and DIR/gcide.dict.dz.
void write_dictionary(const fs::path& dir) {
  std::string text, index;
  std::vector<std::string> lines;
  for (const auto& [head, entry] : kEntries) {
    lines.push_back(head + "\t" + dictd_b64(text.size()) + "\t" + dictd_b64(entry.size()) + "\n");
    text += entry;
  }
  std::sort(lines.begin(), lines.end());
  for (auto& l : lines) index += l;
  std::ofstream(dir / "gcide.index", std::ios::binary) << index;
  write_gz(dir / "gcide.dict.dz", text);
}

std::vector<std::string> read_all(const fs::path& dir) {
  std::vector<std::string> out;
  read_gcide(dir.string(), [&](std::string s) { out.push_back(std::move(s)); });
  return out;
}

}  // namespace

TEST(Gcide, DefinitionsAndQuotationsWithoutMarkup) {
  TempDir d("gcide");
  write_dictionary(d.p);
  EXPECT_EQ(read_all(d.p), kSentences);
}

TEST(Gcide, MissingFilesNameTheFileAndThePackage) {
  TempDir d("gcide-missing");
  std::string e = error_of([&] { read_all(d.p); });
  EXPECT_NE(e.find("gcide.index"), std::string::npos) << e;
  EXPECT_NE(e.find("dict-gcide"), std::string::npos) << e;
  write_dictionary(d.p);
  fs::remove(d.p / "gcide.dict.dz");
  e = error_of([&] { read_all(d.p); });
  EXPECT_NE(e.find("gcide.dict.dz"), std::string::npos) << e;
  EXPECT_NE(e.find("dict-gcide"), std::string::npos) << e;
}

// Damaged input is one Error naming the file, never a crash or a silent partial read.
TEST(Gcide, TruncatedOrDamagedFilesAreCleanErrors) {
  TempDir d("gcide-bad");
  write_dictionary(d.p);
  const std::string gz = slurp(d.p / "gcide.dict.dz"), index = slurp(d.p / "gcide.index");
  auto with_dict = [&](const std::string& bytes) {
    std::ofstream(d.p / "gcide.dict.dz", std::ios::binary) << bytes;
    return error_of([&] { read_all(d.p); });
  };
  for (size_t cut : {size_t(0), size_t(10), gz.size() / 2, gz.size() - 4}) {
    const std::string e = with_dict(gz.substr(0, cut));
    EXPECT_NE(e.find("gcide"), std::string::npos) << "cut at " << cut << ": " << e;
  }
  std::string flipped = gz;
  for (size_t i = 20; i < flipped.size() - 8; i += 7) flipped[i] = char(flipped[i] ^ 0x5A);
  EXPECT_NE(with_dict(flipped).find("gcide.dict.dz"), std::string::npos);
  EXPECT_NE(with_dict("plain text, not gzip\n").find("gcide.dict.dz"), std::string::npos);
  with_dict(gz);

  auto with_index = [&](const std::string& bytes) {
    std::ofstream(d.p / "gcide.index", std::ios::binary) << bytes;
    return error_of([&] { read_all(d.p); });
  };
  std::string e = with_index(index + "Zebra\t!!\tB\n");
  EXPECT_NE(e.find("gcide.index:" + std::to_string(kEntries.size() + 1)), std::string::npos) << e;
  e = with_index(index + "Zebra\tAAAA\n");
  EXPECT_NE(e.find("gcide.index"), std::string::npos) << e;
  e = with_index(index + "Zebra\t" + dictd_b64(1u << 30) + "\tBA\n");  // past the end of the text
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
  e = with_index(index + "Zebra\tA\t" + dictd_b64(1ull << 40) + "\n");  // an entry larger than any
  EXPECT_NE(e.find("gcide.index"), std::string::npos) << e;
  e = with_index("");
  EXPECT_NE(e.find("no entries"), std::string::npos) << e;
}

// Any bytes as an entry: texts or nothing, never a crash (the fuzz-style check of the entry parser).
TEST(Gcide, GarbledEntriesGiveTextsOrNothing) {
  std::mt19937 rng(7);
  std::string pieces = "[]{}()\\\n -.;:,\"'*`^aZ19";
  int64_t texts = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int n = int(rng() % 200);
    for (int i = 0; i < n; ++i)
      s += rng() % 4 == 0 ? char(rng() % 256) : pieces[rng() % pieces.size()];
    if (round % 3 == 0) s = kEntries[1 + rng() % (kEntries.size() - 1)].second.substr(0, rng() % 300) + s;
    gcide_entry_texts(s, [&](std::string t) {
      EXPECT_FALSE(t.empty());
      EXPECT_EQ(t.find_first_of("[]{}\\"), std::string::npos) << t;
      ++texts;
    });
  }
  EXPECT_GT(texts, 0);
}
