// ferry::authz's policy (ferry/authz.h): gRFC A43's JSON read into rules, the rules compiled into
// matchers, and the per-call evaluation, which allocates nothing. The semantics are grpc-go's
// (authz/rbac_translator.go and internal/xds/rbac), which the agreement test holds ferry to.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "authz/policy_internal.h"
#include "client/json.h"
#include "common/strings.h"
#include "ferry/authz.h"
#include "ferry/metadata.h"
#include "ferry/tls.h"

namespace ferry {

namespace {

using detail::JsonMember;
using detail::JsonValue;
using detail::to_absl;
using detail::to_std;
using Kind = JsonValue::Kind;

// ---- matching ---------------------------------------------------------------------------------

// A value as grpc-go's header matchers see it: every value of the key, joined with ",".
class JoinedValues {
 public:
  JoinedValues(const Metadata& md, std::string_view key) : md_(md), key_(key) {
    for (std::size_t i = 0; i < md.size(); ++i) {
      const auto [k, v] = md.entry(i);
      if (k.size() != key.size() || !authz_detail::bytes_equal(k.data(), key.data(), k.size())) {
        continue;
      }
      if (count_ == 0) first_ = i;
      size_ += (count_ == 0 ? 0 : 1) + v.size();
      ++count_;
    }
  }
  bool present() const { return count_ > 0; }
  std::size_t size() const { return size_; }

  // Whether text equals the joined string's bytes [at, at + text.size()).
  bool equals_at(std::size_t at, std::string_view text) const {
    std::size_t pos = 0;  // where the current piece starts in the joined string
    std::size_t seen = 0;
    for (std::size_t i = first_; i < md_.size() && seen < count_; ++i) {
      const auto [k, v] = md_.entry(i);
      if (k != key_) continue;
      if (seen++ > 0) {  // the "," before this value
        if (!piece(",", pos, at, text)) return false;
        ++pos;
      }
      if (!piece(v, pos, at, text)) return false;
      pos += v.size();
    }
    return true;
  }
  // Go's regexp ".+" (anchored): at least one character, and '.' matches no newline.
  bool non_empty_line() const {
    if (size_ == 0) return false;
    std::size_t seen = 0;
    for (std::size_t i = first_; i < md_.size() && seen < count_; ++i) {
      const auto [k, v] = md_.entry(i);
      if (k != key_) continue;
      ++seen;
      if (v.find('\n') != std::string_view::npos) return false;
    }
    return true;
  }

 private:
  // Compares the overlap of piece (at pos in the joined string) with text (at at).
  static bool piece(std::string_view p, std::size_t pos, std::size_t at, std::string_view text) {
    const std::size_t begin = std::max(pos, at);
    const std::size_t end = std::min(pos + p.size(), at + text.size());
    if (begin >= end) return true;
    return authz_detail::bytes_equal(p.data() + (begin - pos), text.data() + (begin - at),
                                     end - begin);
  }

  const Metadata& md_;
  std::string_view key_;
  std::size_t first_ = 0;
  std::size_t count_ = 0;
  std::size_t size_ = 0;
};

}  // namespace

namespace authz_detail {

bool HeaderMatch::matches(const Metadata& md) const {
  // The usual case first: the key once, its value matched as it is.
  std::size_t count = 0;
  std::string_view only;
  for (std::size_t i = 0; i < md.size() && count < 2; ++i) {
    const auto [k, v] = md.entry(i);
    if (k.size() == key.size() && bytes_equal(k.data(), key.data(), k.size())) {
      only = v;
      ++count;
    }
  }
  if (count == 0) return false;
  if (count == 1) {
    for (const StringMatch& m : values) {
      if (m.matches(only)) return true;
    }
    return false;
  }
  const JoinedValues joined(md, key);
  for (const StringMatch& m : values) {
    switch (m.kind) {
      case StringMatch::Kind::kExact:
        if (joined.size() == m.text.size() && joined.equals_at(0, m.text)) return true;
        break;
      case StringMatch::Kind::kPrefix:
        if (joined.size() >= m.text.size() && joined.equals_at(0, m.text)) return true;
        break;
      case StringMatch::Kind::kSuffix:
        if (joined.size() >= m.text.size() &&
            joined.equals_at(joined.size() - m.text.size(), m.text)) {
          return true;
        }
        break;
      case StringMatch::Kind::kNonEmptyLine:
        if (joined.non_empty_line()) return true;
        break;
    }
  }
  return false;
}

PeerNames peer_names(const PeerIdentity* peer) {
  if (peer == nullptr) return {};
  if (!peer->uris.empty()) return {peer->uris.data(), peer->uris.data() + peer->uris.size()};
  if (!peer->dns_names.empty()) {
    return {peer->dns_names.data(), peer->dns_names.data() + peer->dns_names.size()};
  }
  return {&peer->subject, &peer->subject + 1};
}

// A41's authenticated principal: an unauthenticated peer matches no principal.
bool principal_matches(const std::vector<StringMatch>& principals, PeerNames peer) {
  if (principals.empty()) return true;  // "source" without principals: any peer
  if (!peer.authenticated()) return false;
  for (const StringMatch& m : principals) {
    for (const std::string* name = peer.begin; name != peer.end; ++name) {
      if (m.matches(*name)) return true;
    }
  }
  return false;
}

bool Rule::matches(std::string_view method, const Metadata& md, PeerNames peer, Known known) const {
  if (known != Known::kPath && !paths.empty()) {
    bool any = false;
    for (const StringMatch& p : paths) {
      if (p.matches(method)) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  if (known != Known::kPrincipal && !principal_matches(principals, peer)) return false;
  for (const HeaderMatch& h : headers) {
    if (!h.matches(md)) return false;
  }
  return true;
}

void PatternIndex::add(const StringMatch& m, std::uint32_t rule) {
  ByText* by_text = &exact;
  if (m.kind != StringMatch::Kind::kExact) {
    auto& lengths = m.kind == StringMatch::Kind::kPrefix ? prefixes : suffixes;
    auto it = std::find_if(lengths.begin(), lengths.end(),
                           [&](const auto& l) { return l.first == m.text.size(); });
    if (it == lengths.end()) {
      lengths.emplace_back(m.text.size(), ByText());
      it = lengths.end() - 1;
    }
    by_text = &it->second;
  }
  Rules& list = (*by_text)[m.text];  // NOLINT: inserts
  if (list.empty() || list.back() != rule) list.push_back(rule);
}

template <class Each>
void PatternIndex::lookup(std::string_view value, Each&& each) const {
  if (!exact.empty()) {
    if (auto it = exact.find(value); it != exact.end()) each(it->second);
  }
  for (const auto& [length, by_text] : prefixes) {
    if (length > value.size()) continue;
    if (auto it = by_text.find(value.substr(0, length)); it != by_text.end()) {
      each(it->second);
    }
  }
  for (const auto& [length, by_text] : suffixes) {
    if (length > value.size()) continue;
    if (auto it = by_text.find(value.substr(value.size() - length)); it != by_text.end()) {
      each(it->second);
    }
  }
}

namespace {

// Whether every pattern can be looked up (exact, prefix or suffix: not "*").
bool indexable(const std::vector<StringMatch>& patterns) {
  return !patterns.empty() &&
         std::none_of(patterns.begin(), patterns.end(), [](const StringMatch& m) {
           return m.kind == StringMatch::Kind::kNonEmptyLine;
         });
}

// The rules a call's lookups found, on the stack: past its capacity the call scans every rule.
class Candidates {
 public:
  void add(const std::vector<std::uint32_t>& rules) {
    if (rules.size() > kCapacity - size_) {
      overflow_ = true;
      return;
    }
    for (std::uint32_t r : rules) ids_[size_++] = r;
  }
  bool overflow() const { return overflow_; }
  // Ascending, each once.
  std::size_t sort_unique() {
    for (std::size_t i = 1; i < size_; ++i) {  // insertion sort: a handful, mostly in order
      const std::uint32_t v = ids_[i];
      std::size_t j = i;
      for (; j > 0 && ids_[j - 1] > v; --j) ids_[j] = ids_[j - 1];
      ids_[j] = v;
    }
    size_ = static_cast<std::size_t>(std::unique(ids_, ids_ + size_) - ids_);
    return size_;
  }
  std::uint32_t operator[](std::size_t i) const { return ids_[i]; }

 private:
  static constexpr std::size_t kCapacity = 64;
  std::uint32_t ids_[kCapacity];
  std::size_t size_ = 0;
  bool overflow_ = false;
};

}  // namespace

void RuleSet::index() {
  keyed_by.assign(rules.size(), Rule::Known::kNothing);
  for (std::uint32_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (indexable(r.paths)) {
      keyed_by[i] = Rule::Known::kPath;
      for (const StringMatch& p : r.paths) by_path.add(p, i);
    } else if (indexable(r.principals)) {
      keyed_by[i] = Rule::Known::kPrincipal;
      for (const StringMatch& p : r.principals) by_principal.add(p, i);
    } else {
      scanned.push_back(i);
    }
  }
}

const Rule* RuleSet::first_match(std::string_view method, const Metadata& md,
                                 PeerNames peer) const {
  Candidates found;
  const auto add = [&](const std::vector<std::uint32_t>& list) { found.add(list); };
  by_path.lookup(method, add);
  if (peer.authenticated() && !by_principal.empty()) {
    for (const std::string* name = peer.begin; name != peer.end; ++name) {
      by_principal.lookup(*name, add);
    }
  }
  if (found.overflow()) return first_match_linear(method, md, peer);
  const std::size_t n = found.sort_unique();
  std::size_t a = 0;
  std::size_t b = 0;
  while (a < n || b < scanned.size()) {
    const bool from_index = b >= scanned.size() || (a < n && found[a] < scanned[b]);
    const std::uint32_t i = from_index ? found[a++] : scanned[b++];
    if (rules[i].matches(method, md, peer, from_index ? keyed_by[i] : Rule::Known::kNothing)) {
      return &rules[i];
    }
  }
  return nullptr;
}

const Rule* RuleSet::first_match_linear(std::string_view method, const Metadata& md,
                                        PeerNames peer) const {
  for (const Rule& r : rules) {
    if (r.matches(method, md, peer, Rule::Known::kNothing)) return &r;
  }
  return nullptr;
}

}  // namespace authz_detail

// ---- parsing ----------------------------------------------------------------------------------

namespace {

using authz_detail::HeaderMatch;
using authz_detail::Rule;
using authz_detail::RuleSet;
using authz_detail::StringMatch;

absl::Status unmarshal_error(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("failed to unmarshal policy: ", to_absl(what)));
}

absl::Status want(const JsonValue& v, Kind kind, std::string_view field) {
  if (v.kind == kind) return absl::OkStatus();
  return unmarshal_error(absl::StrCat("\"", to_absl(field), "\" must be ",
                                      detail::json_kind_name(kind), ", not ",
                                      detail::json_kind_name(v.kind)));
}

// Walks an object's members as Go's decoder does: names match the known fields
// case-insensitively, null leaves a field unset, anything else unknown is an error naming it.
template <class OnField>
absl::Status fields(const JsonValue& object, std::string_view where,
                    std::initializer_list<std::string_view> known, OnField on_field) {
  if (object.kind == Kind::kNull) return absl::OkStatus();
  if (absl::Status s = want(object, Kind::kObject, where); !s.ok()) return s;
  for (const JsonMember& m : object.object) {
    std::string_view name;
    for (std::string_view k : known) {
      if (absl::EqualsIgnoreCase(m.first, to_absl(k))) name = k;
    }
    if (name.empty()) {
      return unmarshal_error(absl::StrCat("unknown field \"", m.first, "\" in ", to_absl(where)));
    }
    if (m.second.kind == Kind::kNull) continue;
    if (absl::Status s = on_field(name, m.second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status read_string(const JsonValue& v, std::string_view field, std::string& out) {
  if (absl::Status s = want(v, Kind::kString, field); !s.ok()) return s;
  out = v.string;
  return absl::OkStatus();
}

absl::Status read_strings(const JsonValue& v, std::string_view field,
                          std::vector<std::string>& out) {
  if (absl::Status s = want(v, Kind::kArray, field); !s.ok()) return s;
  for (const JsonValue& e : v.array) {
    if (e.kind == Kind::kNull) {  // Go's decoder: a null element is the zero value
      out.emplace_back();
      continue;
    }
    if (absl::Status s = want(e, Kind::kString, absl::StrCat(to_absl(field), "[]")); !s.ok())
      return s;
    out.push_back(e.string);
  }
  return absl::OkStatus();
}

// grpc-go's getStringMatcher: "*" is the regexp ".+", "x*" a prefix, "*x" a suffix.
StringMatch string_match(std::string_view value) {
  if (value == "*") return {StringMatch::Kind::kNonEmptyLine, ""};
  if (value.ends_with('*')) {
    return {StringMatch::Kind::kPrefix, std::string(value.substr(0, value.size() - 1))};
  }
  if (value.starts_with('*')) return {StringMatch::Kind::kSuffix, std::string(value.substr(1))};
  return {StringMatch::Kind::kExact, std::string(value)};
}

// gRFC A43: headers a policy may not match on (grpc-go's unsupportedHeaders, and pseudo-headers
// and grpc-* ones, which gRPC keeps for itself).
bool unsupported_header(std::string_view key) {
  static constexpr std::string_view kHopByHop[] = {"host",
                                                   "connection",
                                                   "keep-alive",
                                                   "proxy-authenticate",
                                                   "proxy-authorization",
                                                   "te",
                                                   "trailer",
                                                   "transfer-encoding",
                                                   "upgrade"};
  if (key[0] == ':' || key.starts_with("grpc-")) return true;
  return std::find(std::begin(kHopByHop), std::end(kHopByHop), key) != std::end(kHopByHop);
}

struct RawHeader {
  std::string key;
  std::vector<std::string> values;
};

absl::Status read_rule(const JsonValue& v, std::string_view where, Rule& rule,
                       std::vector<RawHeader>& headers, std::vector<std::string>& principals,
                       std::vector<std::string>& paths) {
  return fields(v, where, {"name", "source", "request"},
                [&](std::string_view field, const JsonValue& value) -> absl::Status {
                  if (field == "name") return read_string(value, "name", rule.name);
                  if (field == "source") {
                    return fields(value, "source", {"principals"},
                                  [&](std::string_view, const JsonValue& p) {
                                    return read_strings(p, "principals", principals);
                                  });
                  }
                  return fields(value, "request", {"paths", "headers"},
                                [&](std::string_view f, const JsonValue& r) -> absl::Status {
                                  if (f == "paths") return read_strings(r, "paths", paths);
                                  if (absl::Status s = want(r, Kind::kArray, "headers"); !s.ok())
                                    return s;
                                  for (const JsonValue& h : r.array) {
                                    RawHeader& header = headers.emplace_back();
                                    absl::Status s =
                                        fields(h, "headers[]", {"key", "values"},
                                               [&](std::string_view hf, const JsonValue& hv) {
                                                 if (hf == "key")
                                                   return read_string(hv, "key", header.key);
                                                 return read_strings(hv, "values", header.values);
                                               });
                                    if (!s.ok()) return s;
                                  }
                                  return absl::OkStatus();
                                });
                });
}

// One rule list: reads every rule, then checks them in order as grpc-go's parseRules does.
absl::Status read_rules(const JsonValue& v, std::string_view list, const std::string& policy_name,
                        RuleSet& out) {
  if (absl::Status s = want(v, Kind::kArray, list); !s.ok()) return s;
  std::vector<std::vector<RawHeader>> raw(v.array.size());
  for (std::size_t i = 0; i < v.array.size(); ++i) {
    Rule& rule = out.rules.emplace_back();
    std::vector<std::string> principals;
    std::vector<std::string> paths;
    if (absl::Status s = read_rule(v.array[i], list, rule, raw[i], principals, paths); !s.ok()) {
      return s;
    }
    for (const std::string& p : principals) rule.principals.push_back(string_match(p));
    for (const std::string& p : paths) rule.paths.push_back(string_match(p));
  }
  // Checked in grpc-go's order: each rule's name, then each of its headers' key and values.
  for (std::size_t i = 0; i < out.rules.size(); ++i) {
    Rule& r = out.rules[i];
    if (r.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", to_absl(list), "\" ", i, ": \"name\" is not present"));
    }
    for (std::size_t h = 0; h < raw[i].size(); ++h) {
      const RawHeader& header = raw[i][h];
      if (header.key.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", to_absl(list), "\" ", i, ": \"headers\" ", h, ": \"key\" is not present"));
      }
      std::string key = absl::AsciiStrToLower(header.key);
      if (unsupported_header(key)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", to_absl(list), "\" ", i, ": \"headers\" ", h, ": unsupported \"key\" ", key));
      }
      if (header.values.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", to_absl(list), "\" ", i, ": \"headers\" ", h, ": \"values\" is not present"));
      }
      HeaderMatch& match = r.headers.emplace_back();
      match.key = std::move(key);
      for (const std::string& value : header.values) match.values.push_back(string_match(value));
    }
  }
  // grpc-go keys its rules by "<policy>_<name>": a later rule of the same name replaces the
  // earlier one. Kept here in the earlier one's place, so that the decision names it as grpc-go
  // would (grpc-go's map has no order).
  std::vector<Rule> unique;
  for (Rule& r : out.rules) {
    r.qualified_name = absl::StrCat(policy_name, "_", r.name);
    auto same =
        std::find_if(unique.begin(), unique.end(), [&](const Rule& u) { return u.name == r.name; });
    if (same != unique.end()) {
      *same = std::move(r);
    } else {
      unique.push_back(std::move(r));
    }
  }
  out.rules = std::move(unique);
  out.index();
  return absl::OkStatus();
}

// As Go's encoding/json writes strings: <, > and & escaped too (the stdout logger's lines
// match grpc-go's byte for byte).
void quote_json(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void append_json(std::string& out, const JsonValue& v) {
  switch (v.kind) {
    case Kind::kNull:
      out += "null";
      break;
    case Kind::kBool:
      out += v.boolean ? "true" : "false";
      break;
    case Kind::kNumber:
      absl::StrAppend(&out, v.number);
      break;
    case Kind::kString:
      quote_json(out, v.string);
      break;
    case Kind::kArray:
      out.push_back('[');
      for (std::size_t i = 0; i < v.array.size(); ++i) {
        if (i > 0) out.push_back(',');
        append_json(out, v.array[i]);
      }
      out.push_back(']');
      break;
    case Kind::kObject:
      out.push_back('{');
      for (std::size_t i = 0; i < v.object.size(); ++i) {
        if (i > 0) out.push_back(',');
        quote_json(out, v.object[i].first);
        out.push_back(':');
        append_json(out, v.object[i].second);
      }
      out.push_back('}');
      break;
  }
}

}  // namespace

void authz_detail::append_json_string(std::string& out, std::string_view s) { quote_json(out, s); }

AuthorizationPolicy::AuthorizationPolicy() : compiled_(std::make_unique<Compiled>()) {}
AuthorizationPolicy::~AuthorizationPolicy() = default;

std::size_t AuthorizationPolicy::deny_rule_count() const { return compiled_->deny.rules.size(); }
std::size_t AuthorizationPolicy::allow_rule_count() const { return compiled_->allow.rules.size(); }

absl::StatusOr<std::shared_ptr<const AuthorizationPolicy>> AuthorizationPolicy::parse(
    std::string_view json, const AuthorizationOptions& options) {
  if (json.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("authorization policy of ", json.size(),
                                                   " bytes: over the limit of ", kMaxPolicyBytes));
  }
  absl::StatusOr<JsonValue> doc = detail::parse_json(json);
  if (!doc.ok()) return unmarshal_error(to_std(doc.status().message()));

  std::shared_ptr<AuthorizationPolicy> policy(new AuthorizationPolicy());
  const JsonValue* deny = nullptr;
  const JsonValue* allow = nullptr;
  std::string condition;
  struct LoggerEntry {
    std::string name;
    std::string config = "{}";
    bool optional = false;
  };
  std::vector<LoggerEntry> loggers;
  absl::Status s =
      fields(*doc, "policy", {"name", "deny_rules", "allow_rules", "audit_logging_options"},
             [&](std::string_view field, const JsonValue& v) -> absl::Status {
               if (field == "name") return read_string(v, "name", policy->name_);
               if (field == "deny_rules") {
                 deny = &v;
                 return want(v, Kind::kArray, "deny_rules");
               }
               if (field == "allow_rules") {
                 allow = &v;
                 return want(v, Kind::kArray, "allow_rules");
               }
               return fields(
                   v, "audit_logging_options", {"audit_condition", "audit_loggers"},
                   [&](std::string_view f, const JsonValue& a) -> absl::Status {
                     if (f == "audit_condition")
                       return read_string(a, "audit_condition", condition);
                     if (absl::Status st = want(a, Kind::kArray, "audit_loggers"); !st.ok())
                       return st;
                     for (const JsonValue& l : a.array) {
                       LoggerEntry& entry = loggers.emplace_back();
                       absl::Status st = fields(
                           l, "audit_loggers[]", {"name", "config", "is_optional"},
                           [&](std::string_view lf, const JsonValue& lv) {
                             if (lf == "name") return read_string(lv, "name", entry.name);
                             if (lf == "is_optional") {
                               if (absl::Status e = want(lv, Kind::kBool, "is_optional"); !e.ok())
                                 return e;
                               entry.optional = lv.boolean;
                               return absl::OkStatus();
                             }
                             if (absl::Status e = want(lv, Kind::kObject, "config"); !e.ok())
                               return e;
                             entry.config.clear();
                             append_json(entry.config, lv);
                             return absl::OkStatus();
                           });
                       if (!st.ok()) return st;
                     }
                     return absl::OkStatus();
                   });
             });
  if (!s.ok()) return s;
  // The rule lists are read first (type errors are the decoder's), then checked in grpc-go's
  // translatePolicy order.
  Compiled& c = *policy->compiled_;
  if (policy->name_.empty()) return absl::InvalidArgumentError("\"name\" is not present");
  if (allow == nullptr || allow->array.empty()) {
    return absl::InvalidArgumentError("\"allow_rules\" is not present");
  }
  if (!condition.empty()) {
    if (condition == "NONE") {
      policy->audit_condition_ = AuditCondition::kNone;
    } else if (condition == "ON_DENY") {
      policy->audit_condition_ = AuditCondition::kOnDeny;
    } else if (condition == "ON_ALLOW") {
      policy->audit_condition_ = AuditCondition::kOnAllow;
    } else if (condition == "ON_DENY_AND_ALLOW") {
      policy->audit_condition_ = AuditCondition::kOnDenyAndAllow;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("failed to parse AuditCondition ", condition,
                       ". Allowed values {NONE, ON_DENY, ON_ALLOW, ON_DENY_AND_ALLOW}"));
    }
  }
  for (std::size_t i = 0; i < loggers.size(); ++i) {
    if (loggers[i].name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing required field: name in audit_logging_options.audit_loggers[", i, "]"));
    }
  }
  if (deny != nullptr && !deny->array.empty()) {
    if (absl::Status st = read_rules(*deny, "deny_rules", policy->name_, c.deny); !st.ok()) {
      return st;
    }
  }
  if (absl::Status st = read_rules(*allow, "allow_rules", policy->name_, c.allow); !st.ok()) {
    return st;
  }
  for (const LoggerEntry& entry : loggers) {
    const AuditLoggerFactory* factory = nullptr;
    if (auto it = options.audit_loggers.find(entry.name); it != options.audit_loggers.end()) {
      factory = &it->second;
    }
    std::shared_ptr<AuditLogger> logger;
    if (factory != nullptr) {
      absl::StatusOr<std::shared_ptr<AuditLogger>> built = (*factory)(entry.config);
      if (!built.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("audit logger \"", entry.name, "\": ", built.status().message()));
      }
      logger = *std::move(built);
    } else if (entry.name == "stdout_logger") {
      logger = make_stdout_audit_logger();
    } else if (entry.optional) {
      continue;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("no builder registered for ", entry.name));
    }
    if (logger != nullptr) policy->audit_loggers_.push_back(std::move(logger));
  }
  return std::shared_ptr<const AuthorizationPolicy>(std::move(policy));
}

AuthorizationDecision AuthorizationPolicy::evaluate(std::string_view method,
                                                    const Metadata& metadata,
                                                    const PeerIdentity* peer) const noexcept {
  const Compiled& c = *compiled_;
  const authz_detail::PeerNames names = authz_detail::peer_names(peer);
  if (const Rule* r = c.deny.first_match(method, metadata, names)) {
    return {false, r->name, r->qualified_name};
  }
  if (const Rule* r = c.allow.first_match(method, metadata, names)) {
    return {true, r->name, r->qualified_name};
  }
  return {false, {}, {}};
}

}  // namespace ferry
