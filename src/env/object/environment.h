// Reading ObjectStorageOptions from the process environment and the AWS
// shared files. Only the program's edges (CLI, Python) call this; the
// storage layer itself takes the options struct.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "weightlift/object_storage.h"

namespace weightlift::internal {

// Lookup of one environment variable; nullptr when unset.
using GetEnvFn = std::function<const char*(const char*)>;

// ObjectStorageOptionsFromEnvironment with the environment and the home
// directory given (tests pass their own).
StatusOr<ObjectStorageOptions> ObjectStorageOptionsFrom(
    const GetEnvFn& getenv, const std::string& home);

// An AWS shared file (credentials or config): section name -> key -> value.
// Section names are kept as written ("default", "profile dev"); keys are
// lower-cased; a nested block ("s3 =" followed by indented "key = value"
// lines) becomes "s3.key".
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
IniSections ParseAwsIni(const std::string& text);

}  // namespace weightlift::internal
