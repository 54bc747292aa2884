#include "util/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "util/error.h"

namespace tokenmill {
namespace {

TEST(EnvFlag, UnsetOrEmptyGivesTheDefault) {
  ::unsetenv("TOKENMILL_TEST_FLAG");
  EXPECT_TRUE(env_flag("TOKENMILL_TEST_FLAG", true));
  EXPECT_FALSE(env_flag("TOKENMILL_TEST_FLAG", false));
  ::setenv("TOKENMILL_TEST_FLAG", "", 1);
  EXPECT_TRUE(env_flag("TOKENMILL_TEST_FLAG", true));
  ::unsetenv("TOKENMILL_TEST_FLAG");
}

TEST(EnvFlag, ZeroAndOne) {
  ::setenv("TOKENMILL_TEST_FLAG", "0", 1);
  EXPECT_FALSE(env_flag("TOKENMILL_TEST_FLAG", true));
  ::setenv("TOKENMILL_TEST_FLAG", "1", 1);
  EXPECT_TRUE(env_flag("TOKENMILL_TEST_FLAG", false));
  ::unsetenv("TOKENMILL_TEST_FLAG");
}

TEST(EnvFlag, OtherValuesAreRejectedWithTheName) {
  for (const char* bad : {"yes", "2", "true", " 1"}) {
    ::setenv("TOKENMILL_TEST_FLAG", bad, 1);
    try {
      env_flag("TOKENMILL_TEST_FLAG", false);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TOKENMILL_TEST_FLAG must be 0 or 1"), std::string::npos) << e.what();
    }
  }
  ::unsetenv("TOKENMILL_TEST_FLAG");
}

}  // namespace
}  // namespace tokenmill
