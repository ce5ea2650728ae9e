// formats/sha256: the FIPS 180-4 example vectors (NIST's "SHA256.pdf"
// examples and the CAVP short/long message set's well-known cases), every
// split of a message into two updates, and the padding boundaries (55, 56,
// 63, 64 bytes) checked against one-shot hashing.
#include "formats/sha256.h"

#include <doctest/doctest.h>

#include <string>

#include "runtime/status.h"

namespace runlens {
namespace {

TEST_CASE("sha256: FIPS 180-4 / NIST example vectors") {
  struct Case {
    std::string message;
    const char* digest;
  };
  const Case cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrst"
       "u",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
      {"The quick brown fox jumps over the lazy dog",
       "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message.size());
    CHECK(sha256::hex(c.message) == c.digest);
    CHECK(sha256::is_hex_digest(sha256::hex(c.message)));
  }
}

TEST_CASE("sha256: incremental updates agree with one shot, across block and padding boundaries") {
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>('a' + (i * 7) % 26));
  for (size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    const std::string m = text.substr(0, len);
    const std::string whole = sha256::hex(m);
    for (size_t cut = 0; cut <= len; ++cut) {
      sha256::Hasher h;
      h.update(m.substr(0, cut));
      h.update(m.substr(cut));
      CHECK_MESSAGE(sha256::to_hex(h.digest()) == whole, "len " << len << " cut " << cut);
    }
  }
}

TEST_CASE("sha256: is_hex_digest accepts 64 lowercase hex digits only") {
  CHECK(sha256::is_hex_digest(std::string(64, 'a')));
  CHECK_FALSE(sha256::is_hex_digest(std::string(63, 'a')));
  CHECK_FALSE(sha256::is_hex_digest(std::string(64, 'A')));
  CHECK_FALSE(sha256::is_hex_digest(std::string(63, 'a') + "g"));
  CHECK_FALSE(sha256::is_hex_digest(""));
}

TEST_CASE("sha256: digest() is of the input so far, and the hasher goes on") {
  sha256::Hasher h;
  h.update("abc");
  CHECK(sha256::to_hex(h.digest()) == sha256::hex("abc"));
  CHECK(sha256::to_hex(h.digest()) == sha256::hex("abc"));  // asking twice changes nothing
  h.update("d");
  CHECK(sha256::to_hex(h.digest()) == sha256::hex("abcd"));
}

}  // namespace
}  // namespace runlens
