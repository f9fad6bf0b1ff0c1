#include "launcher/environment.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"

namespace gpipe {

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals == nullptr) continue;
    env.emplace(std::string(*entry, static_cast<size_t>(equals - *entry)), std::string(equals + 1));
  }
  return env;
}

std::optional<std::string> Lookup(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> LookupInt(const Environment& env, const std::string& name) {
  const std::optional<std::string> text = Lookup(env, name);
  int64_t value = 0;
  if (!text.has_value() || !absl::SimpleAtoi(*text, &value)) return std::nullopt;
  return value;
}

}  // namespace gpipe
