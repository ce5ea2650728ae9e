// The state encoding (docs/state.md): a typed, self-describing binary form of
// an operator's state. Every value carries a one-byte tag, so a reader checks
// each value it reads against the type it expects, and every length against
// the bytes that are left: wrong, truncated or corrupt input is a StateError
// naming the byte offset, never undefined behaviour.
//
// The schema of a state is its C++ type. Standard types (integers, double,
// bool, strings, containers, optional, pair, variant, shared_ptr) have codecs
// here; a struct lists its members once, for both directions:
//
//   struct RunState {
//     int64_t steps = 0;
//     std::map<int32_t, Incident> ranks;
//     template <class Io> void fields(Io& io) { io(steps, ranks); }
//   };
//
// and is encoded as a struct of that many fields (a reader rejects a struct
// with another field count). Types that cannot have a member (a domain type
// declared elsewhere) specialize Codec<T> beside their declaration.
//
// The encoding is deterministic: unordered containers are written in the
// order of their encoded keys, so equal states give equal bytes. Objects held
// by shared_ptr are written once and referenced after, so what several rows
// shared before a snapshot they share after a restore.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/state/state_error.h"

namespace runlens::runtime::state {

// The tag before every value.
enum class Tag : uint8_t {
  kInt = 1,      // zigzag varint
  kUint = 2,     // varint
  kDouble = 3,   // 8 bytes, little endian, the exact bit pattern (NaN and -0 survive)
  kBool = 4,     // 1 byte, 0 or 1
  kBytes = 5,    // varint length, then the bytes
  kSeq = 6,      // varint count, then that many values
  kStruct = 7,   // varint field count, then the fields
  kNull = 8,     // an empty optional or a null pointer
  kSome = 9,     // a present optional, then its value
  kShared = 10,  // a pointer seen for the first time, then its value
  kRef = 11,     // varint: the index of a pointer seen before
  kVariant = 12  // varint: the alternative, then its value
};
std::string_view tag_name(uint8_t tag);

template <class T, class = void>
struct Codec;  // specialize: static void encode(Writer&, const T&); static void decode(Reader&, T&);

class Writer {
 public:
  void tag(Tag t) { buf_.push_back(static_cast<char>(t)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }
  void i64(int64_t v) {
    tag(Tag::kInt);
    varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void u64(uint64_t v) {
    tag(Tag::kUint);
    varint(v);
  }
  void f64(double v) {
    tag(Tag::kDouble);
    uint64_t bits = std::bit_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>(bits >> (8 * i)));
  }
  void boolean(bool v) {
    tag(Tag::kBool);
    buf_.push_back(v ? 1 : 0);
  }
  void bytes(std::string_view s) {
    tag(Tag::kBytes);
    varint(s.size());
    buf_.append(s);
  }
  void seq(size_t n) {
    tag(Tag::kSeq);
    varint(n);
  }
  void raw(std::string_view s) { buf_.append(s); }

  // A struct: its fields, in declaration order.
  template <class... A>
  void operator()(const A&... a) {
    tag(Tag::kStruct);
    varint(sizeof...(A));
    (Codec<A>::encode(*this, a), ...);
  }

  // Index of a shared object already written, or -1 (and remembers it).
  int64_t shared_index(const void* p) {
    auto [it, fresh] = shared_.try_emplace(p, static_cast<int64_t>(shared_.size()));
    return fresh ? -1 : it->second;
  }

  const std::string& data() const { return buf_; }
  std::string take() { return std::move(buf_); }

 private:
  std::string buf_;
  std::unordered_map<const void*, int64_t> shared_;
};

class Reader {
 public:
  // `what` names the state in errors ("rank_join state").
  Reader(std::string_view data, std::string what, size_t base_offset = 0)
      : data_(data), what_(std::move(what)), base_(base_offset) {}

  [[noreturn]] void fail(const std::string& why) const;

  uint8_t peek_tag() {
    need(1);
    return static_cast<uint8_t>(data_[pos_]);
  }
  void expect(Tag t) {
    uint8_t got = peek_tag();
    if (got != static_cast<uint8_t>(t))
      fail("expected " + std::string(tag_name(static_cast<uint8_t>(t))) + ", found " + std::string(tag_name(got)));
    ++pos_;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      need(1);
      auto b = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && b > 1) fail("a varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t i64() {
    expect(Tag::kInt);
    uint64_t z = varint();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  uint64_t u64() {
    expect(Tag::kUint);
    return varint();
  }
  double f64() {
    expect(Tag::kDouble);
    need(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return std::bit_cast<double>(bits);
  }
  bool boolean() {
    expect(Tag::kBool);
    need(1);
    auto b = static_cast<uint8_t>(data_[pos_++]);
    if (b > 1) fail("a bool holds " + std::to_string(b));
    return b == 1;
  }
  std::string_view bytes() {
    expect(Tag::kBytes);
    uint64_t n = varint();
    need(n);
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A sequence's element count; each element takes at least one byte, so a
  // corrupt count cannot make the caller allocate more than the input holds.
  size_t seq() {
    expect(Tag::kSeq);
    uint64_t n = varint();
    if (n > data_.size() - pos_) fail("a sequence of " + std::to_string(n) + " elements is longer than the input");
    return static_cast<size_t>(n);
  }

  template <class... A>
  void operator()(A&... a) {
    expect(Tag::kStruct);
    uint64_t n = varint();
    if (n != sizeof...(A))
      fail("a struct has " + std::to_string(n) + " fields where " + std::to_string(sizeof...(A)) + " were expected");
    (Codec<A>::decode(*this, a), ...);
  }

  // Shared objects read so far, with the type each was read as.
  struct SharedSlot {
    std::shared_ptr<const void> object;
    const void* type = nullptr;
  };
  std::vector<SharedSlot>& shared() { return shared_; }

  bool at_end() const { return pos_ == data_.size(); }
  void expect_end() const {
    if (!at_end()) fail(std::to_string(data_.size() - pos_) + " bytes left over after the state");
  }
  size_t offset() const { return base_ + pos_; }

 private:
  void need(uint64_t n) const {
    if (n > data_.size() - pos_) fail("truncated: " + std::to_string(n) + " more bytes needed");
  }
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
  size_t base_;
  std::vector<SharedSlot> shared_;
};

// Whether a fields() function is decoding: where it checks what it cannot
// trust (the invariants the code that reads the state relies on).
template <class Io>
constexpr bool kReading = std::is_same_v<Io, Reader>;

// --- codecs of standard types ---------------------------------------------------------

template <class T>
struct Codec<T, std::enable_if_t<std::is_integral_v<T> && std::is_signed_v<T>>> {
  static void encode(Writer& w, T v) { w.i64(v); }
  static void decode(Reader& r, T& v) {
    int64_t x = r.i64();
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
      r.fail("the integer " + std::to_string(x) + " is out of range");
    v = static_cast<T>(x);
  }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>>> {
  static void encode(Writer& w, T v) { w.u64(v); }
  static void decode(Reader& r, T& v) {
    uint64_t x = r.u64();
    if (x > std::numeric_limits<T>::max()) r.fail("the integer " + std::to_string(x) + " is out of range");
    v = static_cast<T>(x);
  }
};

template <>
struct Codec<bool> {
  static void encode(Writer& w, bool v) { w.boolean(v); }
  static void decode(Reader& r, bool& v) { v = r.boolean(); }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static void encode(Writer& w, T v) { w.f64(static_cast<double>(v)); }
  static void decode(Reader& r, T& v) { v = static_cast<T>(r.f64()); }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_enum_v<T>>> {
  using U = std::underlying_type_t<T>;
  static void encode(Writer& w, T v) { Codec<U>::encode(w, static_cast<U>(v)); }
  static void decode(Reader& r, T& v) {
    U u;
    Codec<U>::decode(r, u);
    v = static_cast<T>(u);
  }
};

template <>
struct Codec<std::string> {
  static void encode(Writer& w, const std::string& v) { w.bytes(v); }
  static void decode(Reader& r, std::string& v) { v = std::string(r.bytes()); }
};

// A struct with `template <class Io> void fields(Io& io)`.
template <class T>
struct Codec<T, std::void_t<decltype(std::declval<T&>().fields(std::declval<Writer&>()))>> {
  static void encode(Writer& w, const T& v) { const_cast<T&>(v).fields(w); }  // the writer only reads
  static void decode(Reader& r, T& v) { v.fields(r); }
};

template <class A, class B>
struct Codec<std::pair<A, B>> {
  static void encode(Writer& w, const std::pair<A, B>& v) { w(v.first, v.second); }
  static void decode(Reader& r, std::pair<A, B>& v) {
    // Keys of maps are const: decode into plain copies.
    std::remove_const_t<A> a;
    B b;
    r(a, b);
    v = {std::move(a), std::move(b)};
  }
};

template <class T>
struct Codec<std::optional<T>> {
  static void encode(Writer& w, const std::optional<T>& v) {
    if (!v) return w.tag(Tag::kNull);
    w.tag(Tag::kSome);
    Codec<T>::encode(w, *v);
  }
  static void decode(Reader& r, std::optional<T>& v) {
    if (r.peek_tag() == static_cast<uint8_t>(Tag::kNull)) {
      r.expect(Tag::kNull);
      v.reset();
      return;
    }
    r.expect(Tag::kSome);
    v.emplace();
    Codec<T>::decode(r, *v);
  }
};

template <class T, size_t N>
struct Codec<std::array<T, N>> {
  static void encode(Writer& w, const std::array<T, N>& v) {
    w.seq(N);
    for (const auto& x : v) Codec<T>::encode(w, x);
  }
  static void decode(Reader& r, std::array<T, N>& v) {
    size_t n = r.seq();
    if (n != N) r.fail("an array of " + std::to_string(n) + " elements where " + std::to_string(N) + " were expected");
    for (auto& x : v) Codec<T>::decode(r, x);
  }
};

// Sequences that keep their order: vector, deque, list.
template <class C>
struct SeqCodec {
  using T = typename C::value_type;
  static void encode(Writer& w, const C& v) {
    w.seq(v.size());
    for (const auto& x : v) Codec<T>::encode(w, x);
  }
  static void decode(Reader& r, C& v) {
    size_t n = r.seq();
    v.clear();
    for (size_t i = 0; i < n; ++i) {
      T x{};
      Codec<T>::decode(r, x);
      v.push_back(std::move(x));
    }
  }
};
template <class T, class A>
struct Codec<std::vector<T, A>> : SeqCodec<std::vector<T, A>> {};
template <class T, class A>
struct Codec<std::deque<T, A>> : SeqCodec<std::deque<T, A>> {};
template <class T, class A>
struct Codec<std::list<T, A>> : SeqCodec<std::list<T, A>> {};

namespace detail {
template <class K>
void encode_key(Writer& w, const K& k) {
  Codec<K>::encode(w, k);
}

template <class C, class E>
void insert_unique(Reader& r, C& c, E&& e) {
  size_t before = c.size();
  c.insert(std::forward<E>(e));
  if (c.size() == before) r.fail("a key appears twice");
}

// Writes the elements of an unordered container in the byte order of their
// encoded keys, so the encoding does not depend on hashing. The elements
// themselves go to `w` (shared objects in them are numbered there).
template <class C, class Element, class KeyOf>
void encode_unordered(Writer& w, const C& c, KeyOf key_of) {
  std::vector<std::pair<std::string, const Element*>> items;
  items.reserve(c.size());
  for (const auto& x : c) {
    Writer key;
    encode_key(key, key_of(x));
    items.emplace_back(key.take(), &x);
  }
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  w.seq(items.size());
  for (const auto& [key, x] : items) Codec<Element>::encode(w, *x);
}
}  // namespace detail

template <class K, class V, class L, class A>
struct Codec<std::map<K, V, L, A>> {
  using C = std::map<K, V, L, A>;
  static void encode(Writer& w, const C& v) {
    w.seq(v.size());
    for (const auto& [k, x] : v) w(k, x);
  }
  static void decode(Reader& r, C& v) {
    size_t n = r.seq();
    v.clear();
    for (size_t i = 0; i < n; ++i) {
      std::pair<K, V> e;
      Codec<std::pair<K, V>>::decode(r, e);
      detail::insert_unique(r, v, std::move(e));
    }
  }
};

template <class K, class L, class A>
struct Codec<std::set<K, L, A>> {
  using C = std::set<K, L, A>;
  static void encode(Writer& w, const C& v) {
    w.seq(v.size());
    for (const auto& k : v) Codec<K>::encode(w, k);
  }
  static void decode(Reader& r, C& v) {
    size_t n = r.seq();
    v.clear();
    for (size_t i = 0; i < n; ++i) {
      K k{};
      Codec<K>::decode(r, k);
      detail::insert_unique(r, v, std::move(k));
    }
  }
};

template <class K, class V, class H, class E, class A>
struct Codec<std::unordered_map<K, V, H, E, A>> {
  using C = std::unordered_map<K, V, H, E, A>;
  static void encode(Writer& w, const C& v) {
    detail::encode_unordered<C, std::pair<const K, V>>(w, v, [](const auto& x) -> const K& { return x.first; });
  }
  static void decode(Reader& r, C& v) {
    size_t n = r.seq();
    v.clear();
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::pair<K, V> e;
      Codec<std::pair<K, V>>::decode(r, e);
      detail::insert_unique(r, v, std::move(e));
    }
  }
};

template <class K, class H, class E, class A>
struct Codec<std::unordered_set<K, H, E, A>> {
  using C = std::unordered_set<K, H, E, A>;
  static void encode(Writer& w, const C& v) {
    detail::encode_unordered<C, K>(w, v, [](const K& x) -> const K& { return x; });
  }
  static void decode(Reader& r, C& v) {
    size_t n = r.seq();
    v.clear();
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      K k{};
      Codec<K>::decode(r, k);
      detail::insert_unique(r, v, std::move(k));
    }
  }
};

// A shared object: null, a reference to one written before, or its value.
// Decoding checks that a reference names an object of the same type.
namespace detail {
template <class V>
const void* shared_type_id() {
  static const char id = 0;
  return &id;
}
}  // namespace detail

template <class T>
struct Codec<std::shared_ptr<T>> {
  using V = std::remove_const_t<T>;
  static const void* type_id() { return detail::shared_type_id<V>(); }
  static void encode(Writer& w, const std::shared_ptr<T>& p) {
    if (!p) return w.tag(Tag::kNull);
    int64_t seen = w.shared_index(p.get());
    if (seen >= 0) {
      w.tag(Tag::kRef);
      w.varint(static_cast<uint64_t>(seen));
      return;
    }
    w.tag(Tag::kShared);
    Codec<V>::encode(w, *p);
  }
  static void decode(Reader& r, std::shared_ptr<T>& p) {
    uint8_t t = r.peek_tag();
    if (t == static_cast<uint8_t>(Tag::kNull)) {
      r.expect(Tag::kNull);
      p.reset();
      return;
    }
    auto& slots = r.shared();
    if (t == static_cast<uint8_t>(Tag::kRef)) {
      r.expect(Tag::kRef);
      uint64_t i = r.varint();
      if (i >= slots.size() || !slots[i].object)
        r.fail("a reference to shared object " + std::to_string(i) + " of " + std::to_string(slots.size()) + " read");
      if (slots[i].type != type_id()) r.fail("a reference to shared object " + std::to_string(i) + " of another type");
      p = std::const_pointer_cast<T>(std::static_pointer_cast<const V>(slots[i].object));
      return;
    }
    r.expect(Tag::kShared);
    size_t slot = slots.size();
    slots.push_back({nullptr, type_id()});  // numbered before its contents, as the writer does
    auto v = std::make_shared<V>();
    Codec<V>::decode(r, *v);
    r.shared()[slot].object = v;
    p = std::move(v);
  }
};

template <class... T>
struct Codec<std::variant<T...>> {
  using C = std::variant<T...>;
  static void encode(Writer& w, const C& v) {
    w.tag(Tag::kVariant);
    w.varint(v.index());
    std::visit([&](const auto& x) { Codec<std::decay_t<decltype(x)>>::encode(w, x); }, v);
  }
  static void decode(Reader& r, C& v) {
    r.expect(Tag::kVariant);
    uint64_t i = r.varint();
    if (i >= sizeof...(T)) r.fail("variant alternative " + std::to_string(i) + " of " + std::to_string(sizeof...(T)));
    decode_at<0>(r, v, static_cast<size_t>(i));
  }
  template <size_t I>
  static void decode_at(Reader& r, C& v, size_t i) {
    if constexpr (I < sizeof...(T)) {
      if (i != I) return decode_at<I + 1>(r, v, i);
      auto& x = v.template emplace<I>();
      Codec<std::variant_alternative_t<I, C>>::decode(r, x);
    }
  }
};

// Encodes / decodes one value (the payload of a snapshot, docs/state.md).
template <class T>
void encode(Writer& w, const T& v) {
  Codec<T>::encode(w, v);
}
template <class T>
void decode(Reader& r, T& v) {
  Codec<T>::decode(r, v);
}

}  // namespace runlens::runtime::state
