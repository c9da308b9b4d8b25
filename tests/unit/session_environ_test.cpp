// daemon/session_environ.cpp: one copy of each distinct environment, found by content, freed
// with its last user; and definitions that compare their environments by that copy.
#include <gtest/gtest.h>

#include "daemon/session_def.h"
#include "daemon/session_environ.h"

namespace sbsh::daemon::session_environ_tests {

TEST(session_environ, TheSameVariablesAreOneCopy) {
  size_t before = interned_environs();
  auto a = intern_environ({"HOME=/h", "PATH=/bin"});
  auto b = intern_environ({"HOME=/h", "PATH=/bin"});
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(interned_environs(), before + 1);
  EXPECT_EQ(a->bytes, 7u + 1 + 9 + 1);
  EXPECT_TRUE(valid_environ_hash(a->hash));
  EXPECT_EQ(a->hash, environ_hash({"HOME=/h", "PATH=/bin"}));
}

TEST(session_environ, OtherVariablesOrAnotherOrderAreAnotherCopy) {
  auto a = intern_environ({"A=1", "B=2"});
  EXPECT_NE(a.get(), intern_environ({"B=2", "A=1"}).get());
  EXPECT_NE(a.get(), intern_environ({"A=1", "B=3"}).get());
  // Each variable's length is part of the hash: no two lists of the same bytes hash alike.
  EXPECT_NE(environ_hash({"A=1B=2"}), environ_hash({"A=1", "B=2"}));
  EXPECT_NE(environ_hash({}), environ_hash({""}));
}

TEST(session_environ, TheLastUserFreesItsCopy) {
  size_t before = interned_environs();
  {
    auto a = intern_environ({"ONLY_HERE=1"});
    auto b = a;  // NOLINT(performance-unnecessary-copy-initialization): a second owner is the point
    EXPECT_EQ(interned_environs(), before + 1);
    EXPECT_EQ(b.get(), a.get());
  }
  EXPECT_EQ(interned_environs(), before);
  auto again = intern_environ({"ONLY_HERE=1"});  // made anew
  EXPECT_EQ(again->vars, std::vector<std::string>{"ONLY_HERE=1"});
}

TEST(session_environ, HashesAreLowerCaseHexOfSha256) {
  EXPECT_FALSE(valid_environ_hash(""));
  EXPECT_FALSE(valid_environ_hash(std::string(64, 'g')));
  EXPECT_FALSE(valid_environ_hash(std::string(64, 'A')));
  EXPECT_FALSE(valid_environ_hash("../" + std::string(61, 'a')));
  EXPECT_TRUE(valid_environ_hash(std::string(64, 'a')));
}

TEST(session_environ, DefinitionsCompareTheirEnvironmentsByContent) {
  session_def a, b;
  a.set_environment({"HOME=/h"});
  b.set_environment({"HOME=/h"});
  EXPECT_EQ(a.environ.get(), b.environ.get());
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a.environment.empty());  // held once, not in the definition
  b.set_environment({"HOME=/other"});
  EXPECT_FALSE(a == b);
  EXPECT_EQ(text_size(a), own_text_size(a) + a.environ->bytes);
  // A definition that has none and one given an empty one are alike.
  session_def none, empty;
  empty.set_environment({});
  EXPECT_TRUE(none == empty);
}

}  // namespace sbsh::daemon::session_environ_tests
