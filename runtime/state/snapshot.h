// Snapshots of an operator partition's state (docs/state.md): a header that
// names the format, the state's type and its version, the payload (the state
// in the encoding of runtime/state/codec.h) and a CRC-32C of all of it.
//
//   "RLST"  format (1 byte)  type name (varint length + bytes)  state version (varint)
//   payload length (varint)  payload  CRC-32C of everything before (4 bytes, little endian)
//
// Restoring checks, in this order, the magic, the format version, the
// lengths, the checksum, the type name and the state version, then decodes
// the payload, which must be used up exactly. Each failure is a StateError
// that says which.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/operator.h"
#include "runtime/state/codec.h"

namespace runlens::runtime::state {

constexpr uint8_t kFormatVersion = 1;

// What a state is: its name (the operator type, by convention) and the
// version of its layout. Bump the version when the fields change: a snapshot
// of another version is rejected, not misread.
struct StateType {
  std::string_view name;
  uint32_t version = 1;
};

// What a snapshot's header says (the checksum verified).
struct SnapshotInfo {
  uint8_t format = 0;
  std::string type;
  uint32_t version = 0;
  size_t payload_offset = 0, payload_size = 0;
};

std::string seal(StateType type, std::string_view payload);
SnapshotInfo inspect(std::string_view snapshot);
// The payload of a snapshot of `type`; throws StateError.
SnapshotInfo open(std::string_view snapshot, StateType type);

uint32_t crc32c(std::string_view data, uint32_t crc = 0);

// An operator whose state is what `Self::state_fields(io)` lists (io(a, b, c),
// as a struct's fields()), of the type `Self::kState`.
template <class R, class Self>
class Snapshottable : public Operator<R> {
 public:
  std::string snapshot() const override {
    Writer w;
    const_cast<Self&>(static_cast<const Self&>(*this)).state_fields(w);  // the writer only reads
    return seal(Self::kState, w.data());
  }
  // The header is checked before anything is touched; a payload that fails
  // to decode (possible only for a snapshot with a valid checksum that this
  // state's codec did not write) leaves the state valid but unspecified.
  void restore(std::string_view snapshot) override {
    SnapshotInfo info = open(snapshot, Self::kState);
    Reader r(snapshot.substr(info.payload_offset, info.payload_size), std::string(Self::kState.name) + " state",
             info.payload_offset);
    static_cast<Self&>(*this).state_fields(r);
    r.expect_end();
  }
};

}  // namespace runlens::runtime::state
