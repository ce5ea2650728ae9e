// The fast path of jsonl::decode_record: one pass over the line, straight into
// the record's body, no DOM. It takes the lines it can decode with certainty
// and gives every other line (any error, and the rare shapes below) to the DOM
// decoder, which produces the record or the reason exactly as before. So a
// line this path takes decodes to what decode_record_dom gives, and a line it
// does not take costs one extra partial pass. What it does not take:
// - anything the DOM decoder rejects (it never produces an error text itself);
// - "type" not the first key, a key written with escapes, a known key written
//   twice (the DOM decoder's first-or-last-wins rules decide), a number out of
//   double range (strtod decides how it rounds).
// Where the time goes, and why it is shaped so: numbers are most of a
// telemetry line, so digits are read eight at a time and most doubles are
// one IEEE operation (clinger) or one x87 multiplication (exact_double)
// instead of from_chars;
// keys are matched against the field expected next (writers keep contract
// order); symbols come from a per-field cache of the last one; the body is
// built in place in the record's variant.
// tests/formats/jsonl_fast_decode_test.cc holds the two decoders to the same
// result on a corpus, on every truncation and byte flip of it, and on
// hundreds of thousands of numbers, bit for bit.
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/json_escape.h"
#include "formats/jsonl_codec.h"
#include "schema/bytes.h"

namespace runlens::jsonl {
namespace {

constexpr int kMaxDepth = 64;  // as formats/json_reader.cc: containers at depth 64 fail

constexpr std::string_view strip_underscore(std::string_view s) {
  return !s.empty() && s.back() == '_' ? s.substr(0, s.size() - 1) : s;
}

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// How many of the 8 bytes, from the first, are ASCII digits. A byte's borrow
// or carry only reaches later bytes, so bytes up to the first non-digit are
// classified right.
inline int leading_digits(uint64_t v) {
  uint64_t t = v - 0x3030303030303030ull;
  uint64_t non_digit = (t | (t + 0x7676767676767676ull)) & 0x8080808080808080ull;
  return non_digit == 0 ? 8 : __builtin_ctzll(non_digit) >> 3;
}
constexpr uint64_t kPow10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};

// w * 10^q correctly rounded to a double (what from_chars gives), where one
// x87 extended-precision operation decides it; false elsewhere (from_chars
// then). w (< 2^64) is exact in the 64-bit mantissa, and 10^q is the literal
// rounded to it: r = w * 10^q carries two roundings of at most half a unit in
// the 64th bit each, so it lies within 2 such units of the exact value x. x
// rounds to the double r rounds to unless a halfway point between two doubles
// lies between them; halfway points sit 2^11 units apart, at low bits
// 100 0000 0000 of the mantissa, so r more than 4 units away from one is safe.
// The rest (about 1 in 230) goes to from_chars. |q| <= 64 keeps the results
// normal doubles. Valid only with the x87 in extended precision (Linux's
// default), which extended_precision() checks once.
constexpr long double kPow10Extended[129] = {
    1e-64L, 1e-63L, 1e-62L, 1e-61L, 1e-60L, 1e-59L, 1e-58L, 1e-57L, 1e-56L, 1e-55L, 1e-54L, 1e-53L, 1e-52L,
    1e-51L, 1e-50L, 1e-49L, 1e-48L, 1e-47L, 1e-46L, 1e-45L, 1e-44L, 1e-43L, 1e-42L, 1e-41L, 1e-40L, 1e-39L,
    1e-38L, 1e-37L, 1e-36L, 1e-35L, 1e-34L, 1e-33L, 1e-32L, 1e-31L, 1e-30L, 1e-29L, 1e-28L, 1e-27L, 1e-26L,
    1e-25L, 1e-24L, 1e-23L, 1e-22L, 1e-21L, 1e-20L, 1e-19L, 1e-18L, 1e-17L, 1e-16L, 1e-15L, 1e-14L, 1e-13L,
    1e-12L, 1e-11L, 1e-10L, 1e-9L,  1e-8L,  1e-7L,  1e-6L,  1e-5L,  1e-4L,  1e-3L,  1e-2L,  1e-1L,  1e0L,
    1e1L,   1e2L,   1e3L,   1e4L,   1e5L,   1e6L,   1e7L,   1e8L,   1e9L,   1e10L,  1e11L,  1e12L,  1e13L,
    1e14L,  1e15L,  1e16L,  1e17L,  1e18L,  1e19L,  1e20L,  1e21L,  1e22L,  1e23L,  1e24L,  1e25L,  1e26L,
    1e27L,  1e28L,  1e29L,  1e30L,  1e31L,  1e32L,  1e33L,  1e34L,  1e35L,  1e36L,  1e37L,  1e38L,  1e39L,
    1e40L,  1e41L,  1e42L,  1e43L,  1e44L,  1e45L,  1e46L,  1e47L,  1e48L,  1e49L,  1e50L,  1e51L,  1e52L,
    1e53L,  1e54L,  1e55L,  1e56L,  1e57L,  1e58L,  1e59L,  1e60L,  1e61L,  1e62L,  1e63L,  1e64L};
static_assert(std::numeric_limits<long double>::digits == 64, "x87 extended precision");
bool extended_precision() {
  static const bool ok = [] {
    volatile long double one = 1.0L, tiny = 0x1p-62L;
    return one + tiny != one;
  }();
  return ok;
}
inline bool exact_double(uint64_t w, int64_t q, double* out) {
  if (w == 0) return *out = 0.0, true;
  if (q < -64 || q > 64) return false;
  long double r = static_cast<long double>(w) * kPow10Extended[q + 64];
  uint64_t mantissa;
  std::memcpy(&mantissa, &r, sizeof mantissa);
  uint64_t low = mantissa & 0x7FF;
  if (low >= 0x400 - 4 && low <= 0x400 + 4) return false;
  *out = static_cast<double>(r);
  return true;
}
// w * 10^q where both are exact doubles (w < 2^53, |q| <= 22): one IEEE
// multiplication or division, which rounds correctly (Clinger's fast path),
// cheaper than the x87's round trip. Most numbers of up to 15 digits.
constexpr double kPow10Double[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
inline bool clinger(uint64_t w, int64_t q, double* out) {
  if (w > (uint64_t{1} << 53) || q < -22 || q > 22) return false;
  const double d = static_cast<double>(w);
  *out = q < 0 ? d / kPow10Double[-q] : d * kPow10Double[q];
  return true;
}
// The value of eight ASCII digits, the first one most significant (little-endian loads).
inline uint64_t eight_digits_value(uint64_t v) {
  v = (v & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8;
  v = (v & 0x00FF00FF00FF00FF) * 6553601 >> 16;
  return (v & 0x0000FFFF0000FFFF) * 42949672960001 >> 32;
}

// The last symbol one field interned on this thread: run ids and node names
// repeat line after line, so most lookups are one comparison. The view reads
// the symbol table's text, which never moves.
struct SymbolCache {
  Symbol sym;
  std::string_view text;
};

struct Number {
  bool integral = false;  // as json::Value::integral
  int64_t integer = 0;
  double number = 0;
};

class Parser;
// One field of a body: its JSONL name and whether the contract requires it.
struct Slot {
  std::string_view name;
  bool required;
};

class Parser {
 public:
  explicit Parser(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}

  bool record(Record* out);

  // Readers of one field value (not null; the caller skips nulls). Each
  // returns false where the DOM decoder must decide.
  bool read(int64_t* out, SymbolCache&) {
    Number n;
    if (!number(&n)) return false;
    if (n.integral) return *out = n.integer, true;
    if (std::isfinite(n.number) && n.number == std::floor(n.number) && std::fabs(n.number) < 9.007199254740992e15) {
      return *out = static_cast<int64_t>(n.number), true;
    }
    return false;
  }
  bool read(int32_t* out, SymbolCache& c) {
    int64_t i;
    if (!read(&i, c) || i < INT32_MIN || i > INT32_MAX) return false;
    *out = static_cast<int32_t>(i);
    return true;
  }
  bool read(double* out, SymbolCache&) {
    char ch = peek();
    if (ch == '"') {
      std::string_view s;
      if (!string(&s)) return false;
      if (s == "NaN" || s == "nan") return *out = std::numeric_limits<double>::quiet_NaN(), true;
      if (s == "Infinity" || s == "inf") return *out = std::numeric_limits<double>::infinity(), true;
      if (s == "-Infinity" || s == "-inf") return *out = -std::numeric_limits<double>::infinity(), true;
      return false;
    }
    Number n;
    if (!numeric(&n)) return false;
    *out = n.number;
    return true;
  }
  bool read(bool* out, SymbolCache&) {
    if (word4("true")) return *out = true, true;
    if (literal("false")) return *out = false, true;
    return false;
  }
  bool read(Symbol* out, SymbolCache& c) {
    std::string_view s;
    if (peek() != '"' || !string(&s)) return false;
    if (c.sym.empty() || !same_text(c.text, s)) {
      c.sym = Symbol::intern(s);
      c.text = c.sym.str();
    }
    *out = c.sym;
    return true;
  }
  bool read(std::string* out, SymbolCache&) {
    std::string_view s;
    if (peek() != '"' || !string(&s)) return false;
    out->assign(s);
    return true;
  }
  bool read(runlens::Value* out, SymbolCache&) {
    char ch = peek();
    if (ch == '"') {
      std::string_view s;
      if (!string(&s)) return false;
      *out = runlens::Value::of(std::string(s));
      return true;
    }
    if (ch == 't' || ch == 'f') {
      bool b;
      SymbolCache unused;
      if (!read(&b, unused)) return false;
      *out = runlens::Value::of(b ? 1.0 : 0.0);
      return true;
    }
    Number n;
    if (!numeric(&n)) return false;
    *out = runlens::Value::of(n.number);
    return true;
  }
  bool read(ConfigMap* out, SymbolCache&) {
    if (peek() != '{') return false;
    ++p_;
    ws();
    if (peek() == '}') return ++p_, true;
    for (;;) {
      ws();
      std::string_view k;
      if (peek() != '"' || !string(&k)) return false;
      std::string key(k);  // the value may reuse the scratch buffer
      ws();
      if (peek() != ':') return false;
      ++p_;
      ws();
      if (!null()) {
        runlens::Value v;
        SymbolCache unused;
        if (!read(&v, unused)) return false;
        out->emplace_back(std::move(key), std::move(v));
      }
      ws();
      char ch = peek();
      ++p_;
      if (ch == ',') continue;
      if (ch == '}') return true;
      return false;
    }
  }
  bool read(RankList* out, SymbolCache&) {
    if (peek() != '[') return false;
    ++p_;
    ws();
    if (peek() == ']') return ++p_, true;
    for (;;) {
      ws();
      if (!placement(out)) return false;
      ws();
      char ch = peek();
      ++p_;
      if (ch == ',') continue;
      if (ch == ']') return true;
      return false;
    }
  }

 private:
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  void ws() {
    if (p_<end_&& static_cast<unsigned char>(*p_)> ' ') return;  // compact JSON: nothing to skip
    const char* p = p_;
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    p_ = p;
  }
  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) return false;
    p_ += word.size();
    return true;
  }
  // A four-letter word in one load.
  bool word4(const char (&w)[5]) {
    if (end_ - p_ < 4) return false;
    uint32_t a, b;
    std::memcpy(&a, p_, 4);
    std::memcpy(&b, w, 4);
    if (a != b) return false;
    p_ += 4;
    return true;
  }
  bool null() { return peek() == 'n' && word4("null"); }
  // The ':' after a key and the whitespace around it.
  bool colon() {
    if (p_ < end_ && *p_ == ':') {
      ++p_;
    } else {
      ws();
      if (peek() != ':') return false;
      ++p_;
    }
    ws();
    return true;
  }
  // The key `name` (a field name: no escapes) and its closing quote, at p_ on the opening quote.
  bool key_is(std::string_view name) {
    if (static_cast<size_t>(end_ - p_) < name.size() + 2 || p_[0] != '"' || p_[name.size() + 1] != '"' ||
        !same_bytes(p_ + 1, name.data(), name.size())) {
      return false;
    }
    p_ += name.size() + 2;
    return true;
  }

  // A string at '"'. Its text is a view into the line, or into scratch_ when
  // it holds escapes (valid until the next string).
  bool string(std::string_view* out) {
    const char* b = p_ + 1;
    const char* p = b;
    const char* const end = end_;
    while (p < end) {
      unsigned char ch = static_cast<unsigned char>(*p);
      if (ch == '"') {
        *out = std::string_view(b, static_cast<size_t>(p - b));
        p_ = p + 1;
        return true;
      }
      if (ch == '\\') {
        p_ = p;
        return escaped(b, out);
      }
      if (ch < 0x20) return false;
      ++p;
    }
    return false;
  }
  // A key: only plain ones (an escaped key goes to the DOM decoder).
  bool key(std::string_view* out) {
    if (peek() != '"') return false;
    const char* b = ++p_;
    const void* q = std::memchr(p_, '"', static_cast<size_t>(end_ - p_));
    if (!q) return false;
    const char* e = static_cast<const char*>(q);
    for (const char* c = b; c < e; ++c) {
      if (*c == '\\' || static_cast<unsigned char>(*c) < 0x20) return false;
    }
    *out = std::string_view(b, static_cast<size_t>(e - b));
    p_ = e + 1;
    return true;
  }
  bool hex4(uint32_t* out) {
    if (end_ - p_ < 4 || json::parse_hex4(p_, out) != 4) return false;
    p_ += 4;
    return true;
  }
  // The rest of a string from its first backslash, decoded as json_reader does.
  bool escaped(const char* b, std::string_view* out) {
    scratch_.assign(b, static_cast<size_t>(p_ - b));
    while (p_ < end_) {
      char c = *p_;
      if (c == '"') {
        ++p_;
        *out = scratch_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        scratch_.push_back(c);
        ++p_;
        continue;
      }
      if (++p_ >= end_) return false;
      char e = *p_++;
      if (int byte = json::unescape_simple(e); byte >= 0) {
        scratch_.push_back(static_cast<char>(byte));
        continue;
      }
      if (e != 'u') return false;
      uint32_t cp;
      if (!hex4(&cp)) return false;
      if (cp >= 0xD800 && cp < 0xDC00) {
        uint32_t lo;
        if (!literal("\\u") || !hex4(&lo) || lo < 0xDC00 || lo >= 0xE000) return false;
        cp = json::combine_surrogates(cp, lo);
      } else if (cp >= 0xDC00 && cp < 0xE000) {
        return false;
      }
      json::append_utf8(cp, &scratch_);
    }
    return false;
  }

  // A JSON number at '-' or a digit, as json_reader reads it (-Infinity too).
  // Works on a local cursor: a store to p_ could alias the bytes read.
  bool number(Number* n) {
    const char* b = p_;
    const char* p = p_;
    const char* const end = end_;
    bool negative = false;
    if (p >= end) return false;
    if (*p == '-') {
      negative = true;
      ++p;
      if (end - p >= 8 && std::memcmp(p, "Infinity", 8) == 0) {
        p_ = p + 8;
        n->number = -std::numeric_limits<double>::infinity();
        return true;
      }
    }
    if (p >= end || !is_digit(*p)) return false;
    if (*p == '0' && p + 1 < end && is_digit(p[1])) return false;
    const char* digits = p;
    uint64_t w = 0;  // every digit, the fraction's too: exact for up to 19 of them
    p = accumulate_digits(p, end, &w);
    const ptrdiff_t int_digits = p - digits;
    ptrdiff_t frac_digits = 0;
    bool frac = false;
    if (p < end && *p == '.') {
      frac = true;
      ++p;
      if (p >= end || !is_digit(*p)) return false;
      const char* f = p;
      p = accumulate_digits(p, end, &w);
      frac_digits = p - f;
    }
    int64_t exp10 = 0;
    bool exp_ok = true;
    if (p < end && (*p == 'e' || *p == 'E')) {
      frac = true;
      ++p;
      bool exp_negative = false;
      if (p < end && (*p == '+' || *p == '-')) exp_negative = *p++ == '-';
      if (p >= end || !is_digit(*p)) return false;
      const char* e = p;
      for (; p < end && is_digit(*p); ++p) {
        if (exp10 < 100000) exp10 = exp10 * 10 + (*p - '0');
      }
      exp_ok = p - e <= 4;
      if (exp_negative) exp10 = -exp10;
    }
    p_ = p;
    if (!frac) {
      // As from_chars into int64 (json_reader's test), without a second pass
      // for up to 19 digits; longer ones are out of int64's range.
      bool fits = int_digits <= 19 && w <= static_cast<uint64_t>(INT64_MAX) + negative;
      if (fits) {
        n->integer = negative ? static_cast<int64_t>(0 - w) : static_cast<int64_t>(w);
        n->integral = true;
        n->number = n->integer == 0 && negative ? -0.0 : static_cast<double>(n->integer);
        return true;
      }
    }
    double d;
    if (int_digits + frac_digits <= 19 && exp_ok &&
        (clinger(w, exp10 - frac_digits, &d) || (extended_precision() && exact_double(w, exp10 - frac_digits, &d)))) {
      n->number = negative ? -d : d;
      return true;
    }
    auto [q, ec] = std::from_chars(b, p, n->number);
    return ec == std::errc() && q == p;  // out of range: json_reader's strtod decides
  }
  // Appends the digits at p to *w (SWAR, eight at a time).
  static const char* accumulate_digits(const char* p, const char* end, uint64_t* w) {
    uint64_t acc = *w;
    for (;;) {
      if (end - p < 8) {
        while (p < end && is_digit(*p)) acc = acc * 10 + static_cast<uint64_t>(*p++ - '0');
        break;
      }
      uint64_t v = load8(p);
      int k = leading_digits(v);
      if (k == 8) {
        acc = acc * 100000000 + eight_digits_value(v);
        p += 8;
        continue;
      }
      if (k > 0) {
        // The k digits moved to the end of a word of '0's.
        acc = acc * kPow10[k] + eight_digits_value((v << (64 - 8 * k)) | (0x3030303030303030ull >> (8 * k)));
        p += k;
      }
      break;
    }
    *w = acc;
    return p;
  }
  static const char* skip_digits(const char* p, const char* end) {
    while (end - p >= 8) {
      int k = leading_digits(load8(p));
      p += k;
      if (k < 8) return p;
    }
    while (p < end && is_digit(*p)) ++p;
    return p;
  }
  // A number, or the bare NaN / Infinity tokens.
  bool numeric(Number* n) {
    char ch = peek();
    if (ch == '-' || is_digit(ch)) return number(n);
    if (ch == 'N' && literal("NaN")) return n->number = std::numeric_limits<double>::quiet_NaN(), true;
    if (ch == 'I' && literal("Infinity")) return n->number = std::numeric_limits<double>::infinity(), true;
    return false;
  }

  // Any value json_reader accepts, validated and dropped (unknown fields).
  bool skip(int depth) {
    switch (peek()) {
      case '"': {
        std::string_view s;
        return string(&s);
      }
      case '{': {
        if (depth >= kMaxDepth) return false;
        ++p_;
        ws();
        if (peek() == '}') return ++p_, true;
        for (;;) {
          ws();
          std::string_view s;
          if (peek() != '"' || !string(&s)) return false;
          ws();
          if (peek() != ':') return false;
          ++p_;
          ws();
          if (!skip(depth + 1)) return false;
          ws();
          char ch = peek();
          ++p_;
          if (ch == ',') continue;
          if (ch == '}') return true;
          return false;
        }
      }
      case '[': {
        if (depth >= kMaxDepth) return false;
        ++p_;
        ws();
        if (peek() == ']') return ++p_, true;
        for (;;) {
          ws();
          if (!skip(depth + 1)) return false;
          ws();
          char ch = peek();
          ++p_;
          if (ch == ',') continue;
          if (ch == ']') return true;
          return false;
        }
      }
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default: {
        Number n;
        return numeric(&n);
      }
    }
  }

  // One {rank, node, gpu, ...} entry of a run_start's ranks.
  bool placement(RankList* out) {
    if (peek() != '{') return false;
    ++p_;
    RankPlacement pl;
    unsigned seen = 0;  // a key written twice goes to the DOM decoder (it takes the first)
    ws();
    if (peek() == '}') return false;  // no rank
    for (;;) {
      ws();
      std::string_view k;
      if (!key(&k)) return false;
      ws();
      if (peek() != ':') return false;
      ++p_;
      ws();
      unsigned bit = k == "rank"        ? 1
                     : k == "node"      ? 2
                     : k == "gpu"       ? 4
                     : k == "gpu_model" ? 8
                     : k == "node_type" ? 16
                                        : 0;
      if (bit & seen) return false;
      seen |= bit;
      SymbolCache cache;
      bool ok = true;
      if (bit == 0) {
        ok = skip(3);  // top object 0, ranks 1, entry 2
      } else if (null()) {
        ok = bit != 1;  // a null rank is an error
      } else if (bit == 1) {
        ok = read(&pl.rank, cache);
      } else if (bit == 2) {
        ok = read(&pl.node, cache);
      } else if (bit == 4) {
        ok = read(&pl.gpu, cache);
      } else if (bit == 8) {
        ok = read(&pl.gpu_model, cache);
      } else {
        ok = read(&pl.node_type, cache);
      }
      if (!ok) return false;
      ws();
      char ch = peek();
      ++p_;
      if (ch == ',') continue;
      if (ch != '}') return false;
      if (!(seen & 1)) return false;
      out->push_back(pl);
      return true;
    }
  }

  template <class B>
  bool body(B* b, Record* out);

  const char* p_;
  const char* end_;
  std::string scratch_;
};

template <class B>
struct SlotsOf;

#define RUNLENS_SLOT_(T, name, Camel, req) Slot{strip_underscore(#name), req},
#define RUNLENS_READ_(T, name, Camel, req) \
  case Body::F::name:                      \
    return p.read(&b->name, c);
#define RUNLENS_SLOTS_(Type, LIST)                                   \
  template <>                                                        \
  struct SlotsOf<Type> {                                             \
    using Body = Type;                                               \
    static constexpr Slot kSlots[] = {LIST(RUNLENS_SLOT_)};          \
    static bool read(Parser& p, Body* b, size_t i, SymbolCache& c) { \
      switch (static_cast<Body::F>(i)) {                             \
        LIST(RUNLENS_READ_)                                          \
        default:                                                     \
          return false;                                              \
      }                                                              \
    }                                                                \
  };
RUNLENS_SLOTS_(RunStart, RUNLENS_RUN_START_FIELDS)
RUNLENS_SLOTS_(Step, RUNLENS_STEP_FIELDS)
RUNLENS_SLOTS_(Train, RUNLENS_TRAIN_FIELDS)
RUNLENS_SLOTS_(Gpu, RUNLENS_GPU_FIELDS)
RUNLENS_SLOTS_(NodeSample, RUNLENS_NODE_FIELDS)
RUNLENS_SLOTS_(Collective, RUNLENS_COLLECTIVE_FIELDS)
RUNLENS_SLOTS_(DataSample, RUNLENS_DATA_FIELDS)
RUNLENS_SLOTS_(Checkpoint, RUNLENS_CHECKPOINT_FIELDS)
RUNLENS_SLOTS_(Occurrence, RUNLENS_OCCURRENCE_FIELDS)
RUNLENS_SLOTS_(RunEnd, RUNLENS_RUN_END_FIELDS)
#undef RUNLENS_SLOTS_
#undef RUNLENS_READ_
#undef RUNLENS_SLOT_

template <class B>
constexpr uint32_t required_mask() {
  uint32_t m = 0;
  for (size_t i = 0; i < std::size(SlotsOf<B>::kSlots); ++i) {
    if (SlotsOf<B>::kSlots[i].required) m |= 1u << i;
  }
  return m;
}

// The members after "type": time_ns, tenant and the body's fields, in any
// order; unknown ones are validated and dropped, nulls are absent.
template <class B>
bool Parser::body(B* b, Record* out) {
  constexpr const Slot* slots = SlotsOf<B>::kSlots;
  constexpr size_t n = std::size(SlotsOf<B>::kSlots);
  static_assert(n <= 32, "presence bits are 32");
  thread_local SymbolCache caches[n];
  thread_local SymbolCache tenant_cache;
  bool have_time = false, have_tenant = false;
  Symbol tenant;
  size_t next = 0;
  for (;;) {
    ws();
    // Writers keep contract order, some fields absent: look from the field
    // after the last one on, then from the start.
    std::string_view k;
    size_t i = n;
    if (!have_time && key_is("time_ns")) {
      k = "time_ns";
    } else {
      for (i = next; i < n && !key_is(slots[i].name); ++i) {
      }
      if (i == n) {
        for (i = 0; i < next && !key_is(slots[i].name); ++i) {
        }
        if (i == next) i = n;
      }
      if (i < n) {
        k = slots[i].name;
      } else if (!key(&k)) {
        return false;
      }
    }
    if (!colon()) return false;
    if (i < n) {
      if (!null()) {
        if ((b->present >> i) & 1u) return false;
        if (!SlotsOf<B>::read(*this, b, i, caches[i])) return false;
        b->present |= 1u << i;
      }
      next = i + 1;
    } else if (k == "time_ns") {
      if (have_time || !read(&out->time_ns, caches[0])) return false;
      have_time = true;
    } else if (k == "tenant") {
      if (have_tenant) return false;
      have_tenant = true;
      if (!null() && !read(&tenant, tenant_cache)) return false;
    } else if (k == "type") {
      return false;
    } else if (!skip(1)) {
      return false;
    }
    if (p_ < end_ && *p_ == ',') {  // compact JSON: no whitespace to skip
      ++p_;
      continue;
    }
    ws();
    char ch = peek();
    ++p_;
    if (ch == ',') continue;
    if (ch != '}') return false;
    break;
  }
  ws();
  if (p_ < end_ || !have_time) return false;
  constexpr uint32_t required = required_mask<B>();
  if ((b->present & required) != required) return false;
  out->tenant = tenant;
  return true;
}

// kind_from_name for the contract kinds, without a call per name.
bool contract_kind(std::string_view name, Kind* out) {
  static const auto names = [] {
    std::array<std::string_view, kContractKinds> n;
    for (int i = 0; i < kContractKinds; ++i) n[i] = kind_name(static_cast<Kind>(i));
    return n;
  }();
  for (int i = 0; i < kContractKinds; ++i) {
    if (names[i].size() == name.size() && same_bytes(names[i].data(), name.data(), name.size())) {
      *out = static_cast<Kind>(i);
      return true;
    }
  }
  return false;
}

bool Parser::record(Record* out) {
  ws();
  if (peek() != '{') return false;
  ++p_;
  ws();
  std::string_view type;
  if (!key_is("type") || !colon() || peek() != '"' || !string(&type)) return false;
  Kind kind;
  if (!contract_kind(type, &kind)) return false;
  ws();
  if (peek() != ',') return false;  // no time_ns
  ++p_;
  switch (kind) {
    case Kind::kRunStart: {
      auto b = std::make_shared<RunStart>();
      if (!body(b.get(), out)) return false;
      out->body = std::shared_ptr<const RunStart>(std::move(b));
      return true;
    }
#define RUNLENS_CASE_(K, B) \
  case Kind::K:             \
    return body(&out->body.emplace<B>(), out);
      RUNLENS_CASE_(kStep, Step)
      RUNLENS_CASE_(kTrain, Train)
      RUNLENS_CASE_(kGpu, Gpu)
      RUNLENS_CASE_(kNode, NodeSample)
      RUNLENS_CASE_(kCollective, Collective)
      RUNLENS_CASE_(kData, DataSample)
      RUNLENS_CASE_(kCheckpoint, Checkpoint)
      RUNLENS_CASE_(kEvent, Occurrence)
      RUNLENS_CASE_(kRunEnd, RunEnd)
#undef RUNLENS_CASE_
    default:
      return false;
  }
}

}  // namespace

bool decode_record_fast(std::string_view line, Record* out) { return Parser(line).record(out); }

bool decode_record(std::string_view line, Record* out, std::string* error) {
  if (Parser(line).record(out)) return true;
  return decode_record_dom(line, out, error);
}

}  // namespace runlens::jsonl
