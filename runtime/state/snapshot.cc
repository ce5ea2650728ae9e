#include "runtime/state/snapshot.h"

#include <array>

namespace runlens::runtime::state {

namespace {

constexpr std::string_view kMagic = "RLST";

constexpr std::array<uint32_t, 256> crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kCrcTable = crc_table();

[[noreturn]] void bad(const std::string& why) { throw StateError("state snapshot: " + why); }

// Reads the varints of the header; the header has no tags.
struct HeaderReader {
  std::string_view s;
  size_t pos = 0;
  uint64_t varint(const char* what) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= s.size()) bad(std::string("truncated in the header (") + what + ")");
      auto b = static_cast<uint8_t>(s[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad(std::string("a corrupt header (") + what + ")");
  }
};

}  // namespace

std::string_view tag_name(uint8_t tag) {
  switch (static_cast<Tag>(tag)) {
    case Tag::kInt:
      return "an integer";
    case Tag::kUint:
      return "an unsigned integer";
    case Tag::kDouble:
      return "a double";
    case Tag::kBool:
      return "a bool";
    case Tag::kBytes:
      return "a string";
    case Tag::kSeq:
      return "a sequence";
    case Tag::kStruct:
      return "a struct";
    case Tag::kNull:
      return "null";
    case Tag::kSome:
      return "an optional value";
    case Tag::kShared:
      return "a shared object";
    case Tag::kRef:
      return "a shared reference";
    case Tag::kVariant:
      return "a variant";
  }
  return "an unknown tag";
}

void Reader::fail(const std::string& why) const {
  throw StateError("state snapshot: " + what_ + " at byte " + std::to_string(offset()) + ": " + why);
}

uint32_t crc32c(std::string_view data, uint32_t crc) {
  crc = ~crc;
  for (char ch : data) crc = kCrcTable[(crc ^ static_cast<uint8_t>(ch)) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string seal(StateType type, std::string_view payload) {
  Writer h;
  h.raw(kMagic);
  h.raw(std::string_view(reinterpret_cast<const char*>(&kFormatVersion), 1));
  h.varint(type.name.size());
  h.raw(type.name);
  h.varint(type.version);
  h.varint(payload.size());
  std::string out = h.take();
  out.append(payload);
  uint32_t crc = crc32c(out);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(crc >> (8 * i)));
  return out;
}

SnapshotInfo inspect(std::string_view s) {
  if (s.size() < kMagic.size() + 1 || s.substr(0, kMagic.size()) != kMagic) {
    if (s.size() < kMagic.size() && kMagic.substr(0, s.size()) == s)
      bad("truncated: " + std::to_string(s.size()) + " bytes");
    bad("not a runlens state snapshot (no RLST header)");
  }
  SnapshotInfo info;
  info.format = static_cast<uint8_t>(s[kMagic.size()]);
  if (info.format != kFormatVersion)
    bad("format version " + std::to_string(info.format) + " is not supported (this build reads format " +
        std::to_string(kFormatVersion) + ")");
  HeaderReader h{s, kMagic.size() + 1};
  uint64_t name_size = h.varint("type name length");
  if (name_size > s.size() - h.pos) bad("truncated in the header (type name)");
  info.type = std::string(s.substr(h.pos, name_size));
  h.pos += name_size;
  uint64_t version = h.varint("state version");
  if (version > UINT32_MAX) bad("a corrupt header (state version " + std::to_string(version) + ")");
  info.version = static_cast<uint32_t>(version);
  uint64_t size = h.varint("payload length");
  info.payload_offset = h.pos;
  size_t left = s.size() - h.pos;
  if (size > left || left - size < 4)
    bad("truncated: the payload of " + std::to_string(size) + " bytes and its checksum need " +
        std::to_string(size + 4) + " bytes, " + std::to_string(left) + " are left");
  if (left - size > 4) bad(std::to_string(left - size - 4) + " bytes after the checksum");
  info.payload_size = static_cast<size_t>(size);
  size_t body = h.pos + info.payload_size;
  uint32_t want = 0;
  for (int i = 0; i < 4; ++i) want |= static_cast<uint32_t>(static_cast<uint8_t>(s[body + i])) << (8 * i);
  if (crc32c(s.substr(0, body)) != want) bad("checksum mismatch: the snapshot is corrupt");
  return info;
}

SnapshotInfo open(std::string_view s, StateType type) {
  SnapshotInfo info = inspect(s);
  if (info.type != type.name) bad("holds '" + info.type + "' state, not '" + std::string(type.name) + "'");
  if (info.version != type.version)
    bad("'" + info.type + "' state version " + std::to_string(info.version) +
        " cannot be read (this build reads version " + std::to_string(type.version) + ")");
  return info;
}

}  // namespace runlens::runtime::state
