// Implementation of src/client/json.h: a recursive-descent reader over the text, depth-bounded.
#include "client/json.h"

#include <charconv>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace ferry::detail {

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 32;
// Up to this many members an object's duplicate check is a scan; past it a hash set: a scan per
// member made an object of 10^5 members (a 1 MiB text) cost 10^10 comparisons.
constexpr std::size_t kScannedMembers = 8;

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> document() {
    JsonValue v;
    if (absl::Status s = value(v, 0); !s.ok()) return s;
    skip_space();
    if (pos_ != text_.size()) return error("text after the value");
    return v;
  }

 private:
  absl::Status error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("bad JSON at offset ", pos_, ": ",
                                                   absl::string_view(what.data(), what.size())));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return error("nested too deeply");
    skip_space();
    if (pos_ >= text_.size()) return error("a value was expected");
    const char c = text_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.kind = JsonValue::Kind::kString;
      return string(out.string);
    }
    if (consume("true")) {
      out.kind = JsonValue::Kind::kBool;
      out.boolean = true;
      return absl::OkStatus();
    }
    if (consume("false")) {
      out.kind = JsonValue::Kind::kBool;
      return absl::OkStatus();
    }
    if (consume("null")) return absl::OkStatus();
    return number(out);
  }

  absl::Status object(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return absl::OkStatus();
    }
    absl::flat_hash_set<std::string> names;  // filled once the object has kScannedMembers
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return error("a member name was expected");
      std::string key;
      if (absl::Status s = string(key); !s.ok()) return s;
      if (out.object.size() == kScannedMembers && names.empty()) {
        for (const JsonMember& m : out.object) names.insert(m.first);
      }
      const bool duplicate = names.empty() ? out.find(key) != nullptr : !names.insert(key).second;
      if (duplicate) return error(absl::StrCat("duplicate member '", key, "'"));
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ':') return error("':' was expected");
      ++pos_;
      JsonValue v;
      if (absl::Status s = value(v, depth + 1); !s.ok()) return s;
      out.object.push_back({std::move(key), std::move(v)});
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      return error("',' or '}' was expected");
    }
  }

  absl::Status array(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      JsonValue v;
      if (absl::Status s = value(v, depth + 1); !s.ok()) return s;
      out.array.push_back(std::move(v));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return absl::OkStatus();
      }
      return error("',' or ']' was expected");
    }
  }

  absl::Status hex4(unsigned& out) {
    if (pos_ + 4 > text_.size()) return error("a short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      out <<= 4;
      if (h >= '0' && h <= '9') {
        out |= static_cast<unsigned>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        out |= static_cast<unsigned>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        out |= static_cast<unsigned>(h - 'A' + 10);
      } else {
        return error("a bad \\u escape");
      }
    }
    return absl::OkStatus();
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  absl::Status string(std::string& out) {
    ++pos_;  // '"'
    while (true) {
      if (pos_ >= text_.size()) return error("an unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return error("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return error("an unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = 0;
          if (absl::Status s = hex4(cp); !s.ok()) return s;
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
            unsigned low = 0;
            if (!consume("\\u")) return error("a lone surrogate");
            if (absl::Status s = hex4(low); !s.ok()) return s;
            if (low < 0xDC00 || low > 0xDFFF) return error("a lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return error("a lone surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return error("a bad escape");
      }
    }
  }

  absl::Status number(JsonValue& out) {
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const std::size_t start = pos_;
    auto digits = [this] {
      const std::size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return error("a value was expected");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return error("digits after '.' were expected");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return error("exponent digits were expected");
    }
    // std::from_chars, not strtod: strtod reads the decimal point of the C locale (the
    // process's, or the thread's after uselocale), so under de_DE "1.5" read as 1.
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    const std::from_chars_result r = std::from_chars(first, last, out.number);
    if (r.ec == std::errc::result_out_of_range) {
      pos_ = start;
      return error("a number out of the range of a double");
    }
    if (r.ec != std::errc() || r.ptr != last) {
      pos_ = start;
      return error("a malformed number");
    }
    out.kind = JsonValue::Kind::kNumber;
    return absl::OkStatus();
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<JsonValue> parse_json(std::string_view text) { return Reader(text).document(); }

const char* json_kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::kNull:
      return "null";
    case JsonValue::Kind::kBool:
      return "a boolean";
    case JsonValue::Kind::kNumber:
      return "a number";
    case JsonValue::Kind::kString:
      return "a string";
    case JsonValue::Kind::kArray:
      return "an array";
    case JsonValue::Kind::kObject:
      return "an object";
  }
  return "?";
}

}  // namespace ferry::detail
