// Command-line flags for the interop programs, accepted the way gRPC's interop programs take
// them (Go's flag package): --name=value, -name=value, --name value, and a bare --name for a
// boolean. Unknown flags and malformed values are errors (interop tests; header-only).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace ferry::interop {

class Flags {
 public:
  // Declares a flag with its default; a default of "true" or "false" makes it a boolean.
  void define(const std::string& name, std::string default_value, std::string help) {
    const bool boolean = default_value == "true" || default_value == "false";
    flags_[name] = Flag{default_value, std::move(default_value), std::move(help), boolean};
  }

  // Parses argv. On an error (or --help) prints the usage to stderr and returns false.
  bool parse(int argc, char** argv) {
    program_ = argc > 0 ? argv[0] : "program";
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      if (arg.size() < 2 || arg[0] != '-') return usage("unexpected argument " + std::string(arg));
      arg.remove_prefix(arg[1] == '-' ? 2 : 1);
      if (arg == "help" || arg == "h") return usage("");
      const std::size_t eq = arg.find('=');
      const std::string name(arg.substr(0, eq));
      auto it = flags_.find(name);
      if (it == flags_.end()) return usage("unknown flag --" + name);
      Flag& flag = it->second;
      if (eq != std::string_view::npos) {
        flag.value = std::string(arg.substr(eq + 1));
      } else if (flag.boolean) {
        flag.value = "true";  // as in Go, a boolean's value must be attached with '='
      } else if (i + 1 < argc) {
        flag.value = argv[++i];
      } else {
        return usage("flag --" + name + " needs a value");
      }
      if (flag.boolean && flag.value != "true" && flag.value != "false") {
        return usage("flag --" + name + " wants true or false, not '" + flag.value + "'");
      }
    }
    return true;
  }

  const std::string& get(const std::string& name) const { return flags_.at(name).value; }
  bool get_bool(const std::string& name) const { return get(name) == "true"; }
  // Exits with status 2 when the value is not an integer.
  std::int64_t get_int(const std::string& name) const {
    const std::string& v = get(name);
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') {
      std::fprintf(stderr, "%s: flag --%s wants an integer, not '%s'\n", program_.c_str(),
                   name.c_str(), v.c_str());
      std::exit(2);
    }
    return n;
  }

 private:
  struct Flag {
    std::string value;
    std::string default_value;
    std::string help;
    bool boolean;
  };

  bool usage(const std::string& error) const {
    if (!error.empty()) std::fprintf(stderr, "%s: %s\n", program_.c_str(), error.c_str());
    std::fprintf(stderr, "usage: %s [flags]\n", program_.c_str());
    for (const auto& [name, flag] : flags_) {
      std::fprintf(stderr, "  --%s  %s (default '%s')\n", name.c_str(), flag.help.c_str(),
                   flag.default_value.c_str());
    }
    return false;
  }

  std::string program_;
  std::map<std::string, Flag> flags_;
};

}  // namespace ferry::interop
