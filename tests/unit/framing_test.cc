// Tests for shm/framing: length-framed Cap'n Proto messages, the incremental decoder and
// the reader limits that bound what a hostile client can make the daemon do, and frames
// with descriptors passed by SCM_RIGHTS over a unix socket pair.
#include "shm/framing.h"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <kj/exception.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shm/control.capnp.h"
#include "shm/memfd.h"

namespace plexus::shm {
namespace {

using common::encode_frame;
using common::FrameDecoder;
using common::UniqueFd;
using common::untrusted_reader_options;
using ::testing::HasSubstr;
namespace ctl = control;

// ---------------------------------------------------------------------------------------
// Helpers

std::vector<std::byte> hello_frame(uint32_t request_id, const std::string& name) {
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<ctl::ClientMessage>();
  msg.setRequestId(request_id);
  auto hello = msg.initHello();
  hello.setProtocolVersion(kProtocolVersion);
  hello.setRole(ctl::Role::RANK);
  hello.setPoolBytes(uint64_t{1} << 30);
  hello.setProcessName(name);
  return encode_frame(builder);
}

// A frame around raw message words (segment table included), as a hostile client sends.
std::vector<std::byte> raw_frame(const std::vector<uint64_t>& words) {
  auto length = static_cast<uint32_t>(words.size() * sizeof(uint64_t));
  std::vector<std::byte> frame(sizeof(length) + length);
  std::memcpy(frame.data(), &length, sizeof(length));
  if (length > 0) std::memcpy(frame.data() + sizeof(length), words.data(), length);
  return frame;
}

std::vector<std::byte> length_only(uint32_t length) {
  std::vector<std::byte> bytes(sizeof(length));
  std::memcpy(bytes.data(), &length, sizeof(length));
  return bytes;
}

// One frame through a fresh decoder, fed in one go. Fails the test if it does not decode.
kj::Array<capnp::word> decode_one(const std::vector<std::byte>& frame,
                                  size_t limit = kMaxClientFrameBytes) {
  FrameDecoder decoder(limit);
  decoder.append(frame.data(), frame.size());
  auto words = decoder.next();
  EXPECT_EQ(words.error(), "");
  EXPECT_TRUE(words.ok() && words->has_value());
  EXPECT_EQ(decoder.buffered(), 0u);
  if (!words.ok() || !*words) return kj::heapArray<capnp::word>(0);
  return kj::mv(**words);
}

void expect_hello(kj::ArrayPtr<const capnp::word> words, uint32_t request_id,
                  const std::string& name) {
  capnp::FlatArrayMessageReader reader(words, untrusted_reader_options());
  auto msg = reader.getRoot<ctl::ClientMessage>();
  EXPECT_EQ(msg.getRequestId(), request_id);
  ASSERT_EQ(msg.which(), ctl::ClientMessage::HELLO);
  auto hello = msg.getHello();
  EXPECT_EQ(hello.getProtocolVersion(), kProtocolVersion);
  EXPECT_EQ(hello.getRole(), ctl::Role::RANK);
  EXPECT_EQ(hello.getPoolBytes(), uint64_t{1} << 30);
  EXPECT_EQ(std::string(hello.getProcessName().cStr()), name);
}

// Struct pointer word: offset in words from the end of the pointer, data and pointer
// section sizes.
uint64_t struct_pointer(int32_t offset, uint16_t data_words, uint16_t pointers) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) |
         (static_cast<uint64_t>(data_words) << 32) | (static_cast<uint64_t>(pointers) << 48);
}

// The segment-table word of a single-segment message of `words` words.
uint64_t one_segment_table(uint32_t words) { return static_cast<uint64_t>(words) << 32; }

// A single-segment message: a chain of `depth` structs, each with one pointer to the next.
std::vector<uint64_t> nested_chain(int depth) {
  std::vector<uint64_t> m;
  m.push_back(one_segment_table(static_cast<uint32_t>(depth + 1)));
  m.push_back(struct_pointer(0, 0, 1));  // root -> struct 1 (the next word)
  for (int i = 1; i < depth; ++i) m.push_back(struct_pointer(0, 0, 1));
  m.push_back(0);  // the last struct's pointer is null
  return m;
}

// Reads every struct reachable from the root (the traversal a copy or a dump performs).
uint64_t traverse(kj::ArrayPtr<const capnp::word> words, capnp::ReaderOptions options) {
  capnp::FlatArrayMessageReader reader(words, options);
  return reader.getRoot<capnp::AnyPointer>().targetSize().wordCount;
}

// ---------------------------------------------------------------------------------------
// Encoding and decoding

TEST(FramingTest, EncodeFramePrefixesTheMessageLength) {
  std::vector<std::byte> frame = hello_frame(1, "trainer");
  ASSERT_GE(frame.size(), 4u + 8u);
  uint32_t length = 0;
  std::memcpy(&length, frame.data(), sizeof(length));
  EXPECT_EQ(length, frame.size() - 4);
  EXPECT_EQ(length % 8, 0u);
}

TEST(FramingTest, DecodesAFrameFedOneByteAtATime) {
  const std::vector<std::byte> frame = hello_frame(42, "one-byte-at-a-time");
  FrameDecoder decoder(kMaxClientFrameBytes);
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    decoder.append(&frame[i], 1);
    auto none = decoder.next();
    ASSERT_EQ(none.error(), "") << "after " << i + 1 << " bytes";
    ASSERT_FALSE(none->has_value())
        << "a frame decoded after " << i + 1 << " of " << frame.size() << " bytes";
    ASSERT_EQ(decoder.buffered(), i + 1);
  }
  decoder.append(&frame.back(), 1);
  auto next = decoder.next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.error();
  const kj::Array<capnp::word>& words = **next;
  EXPECT_EQ(decoder.buffered(), 0u);
  EXPECT_EQ(words.size() * sizeof(capnp::word), frame.size() - 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(words.begin()) % alignof(capnp::word), 0u);
  expect_hello(words, 42, "one-byte-at-a-time");
  auto after = decoder.next();
  EXPECT_EQ(after.error(), "");
  EXPECT_FALSE(after.ok() && after->has_value());
}

TEST(FramingTest, DecodesAFrameFedInOneGo) {
  auto words = decode_one(hello_frame(7, "trainer"));
  expect_hello(words, 7, "trainer");
}

TEST(FramingTest, DecodesFramesBackToBackAndKeepsAPartialThird) {
  const auto a = hello_frame(1, "first");
  const auto b = hello_frame(2, "second-with-a-longer-name");
  const auto c = hello_frame(3, "third");
  std::vector<std::byte> stream;
  stream.insert(stream.end(), a.begin(), a.end());
  stream.insert(stream.end(), b.begin(), b.end());
  stream.insert(stream.end(), c.begin(), c.begin() + 3);  // not even its length yet

  FrameDecoder decoder(kMaxClientFrameBytes);
  decoder.append(stream.data(), stream.size());
  auto first = decoder.next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.error();
  expect_hello(**first, 1, "first");
  auto second = decoder.next();
  ASSERT_TRUE(second.ok() && second->has_value()) << second.error();
  expect_hello(**second, 2, "second-with-a-longer-name");
  auto none = decoder.next();
  EXPECT_EQ(none.error(), "");
  EXPECT_FALSE(none.ok() && none->has_value());
  EXPECT_EQ(decoder.buffered(), 3u);

  decoder.append(c.data() + 3, c.size() - 3);
  auto third = decoder.next();
  ASSERT_TRUE(third.ok() && third->has_value()) << third.error();
  expect_hello(**third, 3, "third");
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(FramingTest, DecodesManyFramesAcrossBufferCompaction) {
  // Enough buffered frames that the decoder compacts its buffer while a partial frame
  // remains; every frame must still come out intact and in order.
  constexpr int kFrames = 300;
  std::vector<std::vector<std::byte>> frames;
  for (int i = 0; i < kFrames; ++i) {
    frames.push_back(hello_frame(static_cast<uint32_t>(i), std::string(500 + i % 37, 'x')));
  }
  std::vector<std::byte> stream;
  for (const auto& f : frames) stream.insert(stream.end(), f.begin(), f.end());

  FrameDecoder decoder(kMaxClientFrameBytes);
  int decoded = 0;
  size_t fed = 0;
  // Feed in odd-sized chunks, draining after each.
  while (fed < stream.size()) {
    size_t n = std::min<size_t>(7919, stream.size() - fed);
    decoder.append(stream.data() + fed, n);
    fed += n;
    auto words = decoder.next();
    for (; words.ok() && *words; words = decoder.next()) {
      expect_hello(**words, static_cast<uint32_t>(decoded), std::string(500 + decoded % 37, 'x'));
      ++decoded;
    }
    ASSERT_EQ(words.error(), "");
  }
  EXPECT_EQ(decoded, kFrames);
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(FramingTest, RejectsZeroLength) {
  FrameDecoder decoder(kMaxClientFrameBytes);
  auto bytes = length_only(0);
  decoder.append(bytes.data(), bytes.size());
  auto words = decoder.next();
  EXPECT_FALSE(words.ok());
  EXPECT_THAT(words.error(),
              HasSubstr("frame length 0 is not a positive multiple of 8 up to 65536"));
}

TEST(FramingTest, RejectsLengthNotAMultipleOfEight) {
  for (uint32_t length : {1u, 4u, 12u, 65535u}) {
    FrameDecoder decoder(kMaxClientFrameBytes);
    std::vector<std::byte> frame = length_only(length);
    frame.resize(4 + length);  // the whole payload is there
    decoder.append(frame.data(), frame.size());
    auto words = decoder.next();
    EXPECT_FALSE(words.ok());
    EXPECT_THAT(words.error(), HasSubstr("frame length " + std::to_string(length)));
  }
}

TEST(FramingTest, RejectsLengthOverTheLimitBeforeThePayloadArrives) {
  for (uint32_t length :
       {static_cast<uint32_t>(kMaxClientFrameBytes + 8), 1u << 20, 0xfffffff8u, 0xffffffffu}) {
    FrameDecoder decoder(kMaxClientFrameBytes);
    auto bytes = length_only(length);
    decoder.append(bytes.data(), bytes.size());
    auto words = decoder.next();
    EXPECT_FALSE(words.ok());
    EXPECT_THAT(words.error(), HasSubstr("frame length " + std::to_string(length) +
                                         " is not a positive multiple of 8 up to 65536"));
  }
}

TEST(FramingTest, AcceptsLengthExactlyAtTheLimit) {
  std::vector<uint64_t> words(kMaxClientFrameBytes / 8, 0);
  FrameDecoder decoder(kMaxClientFrameBytes);
  auto frame = raw_frame(words);
  decoder.append(frame.data(), frame.size() - 1);
  auto none = decoder.next();
  EXPECT_EQ(none.error(), "");
  EXPECT_FALSE(none.ok() && none->has_value());
  decoder.append(&frame.back(), 1);
  auto out = decoder.next();
  ASSERT_TRUE(out.ok() && out->has_value()) << out.error();
  EXPECT_EQ((*out)->size(), kMaxClientFrameBytes / 8);
}

TEST(FramingTest, DaemonFrameLimitIsLargerThanTheClientOne) {
  std::vector<uint64_t> words(kMaxClientFrameBytes / 8 + 1, 0);
  auto frame = raw_frame(words);
  FrameDecoder client_side(kMaxDaemonFrameBytes);
  client_side.append(frame.data(), frame.size());
  auto taken = client_side.next();
  EXPECT_TRUE(taken.ok() && taken->has_value()) << taken.error();
  FrameDecoder daemon_side(kMaxClientFrameBytes);
  daemon_side.append(frame.data(), frame.size());
  auto refused = daemon_side.next();
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.error(), HasSubstr("frame length 65544"));
}

// ---------------------------------------------------------------------------------------
// Hostile payloads with a valid frame length

// Reads a ClientMessage's request id out of a decoded frame, as the daemon would.
uint32_t read_request_id(kj::ArrayPtr<const capnp::word> words) {
  capnp::FlatArrayMessageReader reader(words, untrusted_reader_options());
  return reader.getRoot<ctl::ClientMessage>().getRequestId();
}

TEST(FramingHostileTest, SegmentTableClaimingMoreThanTheFrameThrows) {
  // One segment of 1000 words in a 16-byte payload.
  auto words = decode_one(raw_frame({one_segment_table(1000), struct_pointer(0, 1, 0)}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
}

TEST(FramingHostileTest, AllOnesPayloadThrows) {
  auto words = decode_one(raw_frame({~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
}

TEST(FramingHostileTest, HugeSegmentCountThrows) {
  // 2^31 segments claimed by an 8-word message.
  auto words = decode_one(raw_frame({0x7fffffffu, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
}

TEST(FramingHostileTest, RootPointerOutOfBoundsThrows) {
  auto words = decode_one(raw_frame({one_segment_table(1), struct_pointer(100, 1, 1)}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
  // Pointing backwards out of the segment.
  auto back = decode_one(raw_frame({one_segment_table(1), struct_pointer(-5, 1, 0)}));
  EXPECT_THROW(read_request_id(back), kj::Exception);
}

TEST(FramingHostileTest, FarPointerToAMissingSegmentThrows) {
  // Far pointer (kind 2), landing pad 0 in segment 5, in a one-segment message.
  const uint64_t far = 2 | (uint64_t{5} << 32);
  auto words = decode_one(raw_frame({one_segment_table(1), far}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
}

TEST(FramingHostileTest, ListWhereAStructIsExpectedThrows) {
  // List pointer (kind 1) of 3 bytes as the root of what should be a ClientMessage.
  const uint64_t list = 1 | (uint64_t{2} << 32) | (uint64_t{3} << 35);
  auto words = decode_one(raw_frame({one_segment_table(2), list, 0}));
  EXPECT_THROW(read_request_id(words), kj::Exception);
}

TEST(FramingHostileTest, TextWithoutTerminatorThrows) {
  // ClientMessage {requestId, hello -> Hello {processName -> 8 bytes "abcdefgh" (no NUL)}}.
  // ClientMessage: 1 data word (requestId + union tag), 1 pointer. Hello: 2 data words,
  // 1 pointer (processName).
  std::vector<uint64_t> m;
  m.push_back(one_segment_table(7));
  m.push_back(struct_pointer(0, 1, 1));            // word 0: root -> ClientMessage at word 1
  m.push_back(uint64_t{9} | (uint64_t{0} << 32));  // word 1: requestId 9, which = hello (0)
  m.push_back(struct_pointer(0, 2, 1));            // word 2: hello -> Hello at word 3
  m.push_back(1);                                  // word 3: protocolVersion 1
  m.push_back(0);                                  // word 4: poolBytes
  m.push_back(1 | (uint64_t{2} << 32) | (uint64_t{8} << 35));  // word 5: Text, 8 bytes
  uint64_t text;
  std::memcpy(&text, "abcdefgh", 8);
  m.push_back(text);  // word 6
  auto words = decode_one(raw_frame(m));
  capnp::FlatArrayMessageReader reader(words, untrusted_reader_options());
  auto msg = reader.getRoot<ctl::ClientMessage>();
  EXPECT_EQ(msg.getRequestId(), 9u);
  ASSERT_EQ(msg.which(), ctl::ClientMessage::HELLO);
  EXPECT_THROW(msg.getHello().getProcessName(), kj::Exception);
}

TEST(FramingHostileTest, SelfReferencingStructHitsTheNestingLimit) {
  // Root -> struct at word 1 whose only pointer points back at itself: an endless chain.
  auto words = decode_one(
      raw_frame({one_segment_table(2), struct_pointer(0, 0, 1), struct_pointer(-1, 0, 1)}));
  EXPECT_THROW(traverse(words, untrusted_reader_options()), kj::Exception);
}

TEST(FramingHostileTest, DeepNestingBeyondTheUntrustedLimitThrows) {
  // 20 levels: fine under Cap'n Proto's default limit of 64, not under ours (16).
  auto words = decode_one(raw_frame(nested_chain(20)));
  EXPECT_NO_THROW(traverse(words, capnp::ReaderOptions()));
  EXPECT_THROW(traverse(words, untrusted_reader_options()), kj::Exception);
  // Within the limit it reads fine.
  auto shallow = decode_one(raw_frame(nested_chain(10)));
  EXPECT_NO_THROW(traverse(shallow, untrusted_reader_options()));
}

TEST(FramingHostileTest, AmplifiedVoidListExceedsTheTraversalLimit) {
  // A root List(Void) claiming 200,000 elements costs no bytes on the wire but counts
  // against the traversal limit: default options allow it, ours do not.
  const uint64_t void_list = 1 | (uint64_t{0} << 32) | (uint64_t{200000} << 35);
  auto words = decode_one(raw_frame({one_segment_table(1), void_list}));
  auto read = [&](capnp::ReaderOptions options) {
    capnp::FlatArrayMessageReader reader(words, options);
    return reader.getRoot<capnp::List<capnp::Void>>().size();
  };
  EXPECT_EQ(read(capnp::ReaderOptions()), 200000u);
  EXPECT_THROW(read(untrusted_reader_options()), kj::Exception);
}

TEST(FramingHostileTest, RepeatedReadsOfALargeFieldExceedTheTraversalLimit) {
  // A ~60 KB process name fits in one client frame; reading it over and over (work a
  // hostile message could make a careless handler do) is cut off by the traversal limit.
  const std::string name(60000, 'n');
  auto words = decode_one(hello_frame(5, name));
  auto read_many = [&](capnp::ReaderOptions options, int times) {
    capnp::FlatArrayMessageReader reader(words, options);
    size_t total = 0;
    for (int i = 0; i < times; ++i) {
      total += reader.getRoot<ctl::ClientMessage>().getHello().getProcessName().size();
    }
    return total;
  };
  EXPECT_EQ(read_many(untrusted_reader_options(), 1), name.size());
  EXPECT_EQ(read_many(capnp::ReaderOptions(), 40), 40 * name.size());
  EXPECT_THROW(read_many(untrusted_reader_options(), 40), kj::Exception);
  const capnp::ReaderOptions options = untrusted_reader_options();
  EXPECT_LE(options.nestingLimit, 16);
  EXPECT_LE(options.traversalLimitInWords, uint64_t{1} << 17);
}

// ---------------------------------------------------------------------------------------
// Sockets and descriptors

struct SocketPair {
  UniqueFd a;
  UniqueFd b;
};

SocketPair make_socketpair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return {};
  return SocketPair{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

bool same_file(int x, int y) {
  struct stat sx {};
  struct stat sy {};
  if (::fstat(x, &sx) != 0 || ::fstat(y, &sy) != 0) return false;
  return sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino;
}

// Receives until one frame decodes (each read bounded by a poll timeout).
struct Received {
  std::optional<kj::Array<capnp::word>> words;
  std::vector<UniqueFd> fds;
  bool truncated = false;
  std::string error;
};

Received receive_frame(int sock, size_t limit) {
  Received r;
  FrameDecoder decoder(limit);
  std::vector<std::byte> buf(64 * 1024);
  while (true) {
    pollfd p{sock, POLLIN, 0};
    int ready = ::poll(&p, 1, 10000);
    if (ready <= 0) {
      r.error = "no data within 10 s";
      return r;
    }
    bool truncated = false;
    ssize_t n = recv_with_fds(sock, buf.data(), buf.size(), &r.fds, &truncated);
    if (n <= 0) {
      r.error = n == 0 ? "peer closed" : std::string("recv failed: ") + std::strerror(errno);
      return r;
    }
    r.truncated = r.truncated || truncated;
    decoder.append(buf.data(), static_cast<size_t>(n));
    auto next = decoder.next();
    if (!next.ok()) r.error = next.error();
    if (!next.ok() || *next) {
      if (next.ok()) r.words = next.take();
      return r;
    }
  }
}

TEST(FramingSocketTest, SendsAFrameWithTwoDescriptors) {
  SocketPair sp = make_socketpair();
  ASSERT_TRUE(sp.a && sp.b);
  UniqueFd memfd = create_sealed_memfd("framing-test", 4096);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd pipe_read(p[0]);
  UniqueFd pipe_write(p[1]);

  const auto frame = hello_frame(11, "with-fds");
  const int fds[] = {memfd.get(), pipe_write.get()};
  ASSERT_EQ(send_frame(sp.a.get(), frame, fds), "");

  Received r = receive_frame(sp.b.get(), kMaxClientFrameBytes);
  ASSERT_TRUE(r.words.has_value()) << r.error;
  expect_hello(*r.words, 11, "with-fds");
  EXPECT_FALSE(r.truncated);
  ASSERT_EQ(r.fds.size(), 2u);
  EXPECT_NE(r.fds[0].get(), memfd.get());
  EXPECT_NE(r.fds[1].get(), pipe_write.get());
  EXPECT_TRUE(same_file(r.fds[0].get(), memfd.get())) << "first fd is not the memfd";
  EXPECT_TRUE(same_file(r.fds[1].get(), pipe_write.get())) << "second fd is not the pipe";
  EXPECT_FALSE(same_file(r.fds[0].get(), r.fds[1].get()));
  for (const auto& fd : r.fds) {
    EXPECT_NE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0) << "received fd is not close-on-exec";
  }

  // They really are the same objects: the memfd's contents and the pipe's data flow.
  Mapping mine = map_shared(memfd.get(), 4096);
  Mapping theirs = map_shared(r.fds[0].get(), 4096);
  std::memcpy(theirs.data(), "shared", 6);
  EXPECT_EQ(std::memcmp(mine.data(), "shared", 6), 0);
  ASSERT_EQ(::write(r.fds[1].get(), "z", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(pipe_read.get(), &c, 1), 1);
  EXPECT_EQ(c, 'z');
}

TEST(FramingSocketTest, FrameWithoutDescriptorsReceivesNone) {
  SocketPair sp = make_socketpair();
  ASSERT_EQ(send_frame(sp.a.get(), hello_frame(3, "plain")), "");
  Received r = receive_frame(sp.b.get(), kMaxClientFrameBytes);
  ASSERT_TRUE(r.words.has_value()) << r.error;
  expect_hello(*r.words, 3, "plain");
  EXPECT_TRUE(r.fds.empty());
  EXPECT_FALSE(r.truncated);
}

TEST(FramingSocketTest, RefusesTooManyDescriptorsAndSendsNothing) {
  SocketPair sp = make_socketpair();
  std::vector<UniqueFd> owned;
  std::vector<int> fds;
  for (size_t i = 0; i < kMaxFdsPerFrame + 1; ++i) {
    owned.push_back(create_sealed_memfd("many", 64));
    fds.push_back(owned.back().get());
  }
  EXPECT_THAT(send_frame(sp.a.get(), hello_frame(1, "x"), fds), HasSubstr("too many descriptors"));
  pollfd p{sp.b.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "bytes were sent despite the refusal";

  // Exactly the maximum is fine.
  fds.pop_back();
  ASSERT_EQ(send_frame(sp.a.get(), hello_frame(2, "x"), fds), "");
  Received r = receive_frame(sp.b.get(), kMaxClientFrameBytes);
  ASSERT_TRUE(r.words.has_value()) << r.error;
  EXPECT_EQ(r.fds.size(), kMaxFdsPerFrame);
  EXPECT_FALSE(r.truncated);
  for (size_t i = 0; i < r.fds.size(); ++i) EXPECT_TRUE(same_file(r.fds[i].get(), fds[i]));
}

TEST(FramingSocketTest, SendToAClosedPeerReportsAnErrorWithoutSigpipe) {
  SocketPair sp = make_socketpair();
  sp.b.reset();
  std::string error = send_frame(sp.a.get(), hello_frame(1, "nobody"));
  EXPECT_THAT(error, HasSubstr("sendmsg failed"));
}

TEST(FramingSocketTest, RecvReportsClosedPeerAndWouldBlock) {
  SocketPair sp = make_socketpair();
  ASSERT_EQ(::fcntl(sp.b.get(), F_SETFL, O_NONBLOCK), 0);
  std::byte buf[64];
  std::vector<UniqueFd> fds;
  bool truncated = true;
  errno = 0;
  EXPECT_EQ(recv_with_fds(sp.b.get(), buf, sizeof(buf), &fds, &truncated), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
  sp.a.reset();
  EXPECT_EQ(recv_with_fds(sp.b.get(), buf, sizeof(buf), &fds, &truncated), 0);
  EXPECT_TRUE(fds.empty());
}

TEST(FramingSocketTest, LargeFrameWithDescriptorsArrivesWholeWithFdsOnce) {
  // Bigger than a socket buffer: the sender blocks and writes in pieces while we read.
  SocketPair sp = make_socketpair();
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<ctl::DaemonMessage>();
  msg.setRequestId(77);
  auto status = msg.initStatusReply();
  const std::string big(3 * 1024 * 1024, 'v');
  status.setVersion(big);
  const std::vector<std::byte> frame = encode_frame(builder);
  ASSERT_LE(frame.size() - 4, kMaxDaemonFrameBytes);

  UniqueFd memfd = create_sealed_memfd("big-frame", 4096);
  UniqueFd memfd2 = create_sealed_memfd("big-frame-2", 8192);
  std::string send_error = "not run";
  std::thread sender([&] {
    const int fds[] = {memfd.get(), memfd2.get()};
    send_error = send_frame(sp.a.get(), frame, fds);
  });
  Received r = receive_frame(sp.b.get(), kMaxDaemonFrameBytes);
  if (!r.words) sp.b.reset();  // unblock the sender so the join cannot hang
  sender.join();
  ASSERT_TRUE(r.words.has_value()) << r.error;
  EXPECT_EQ(send_error, "");
  ASSERT_EQ(r.fds.size(), 2u) << "descriptors must arrive once, with the frame";
  EXPECT_TRUE(same_file(r.fds[0].get(), memfd.get()));
  EXPECT_TRUE(same_file(r.fds[1].get(), memfd2.get()));
  capnp::ReaderOptions options;
  options.traversalLimitInWords = frame.size();
  capnp::FlatArrayMessageReader reader(*r.words, options);
  auto got = reader.getRoot<ctl::DaemonMessage>();
  EXPECT_EQ(got.getRequestId(), 77u);
  ASSERT_EQ(got.which(), ctl::DaemonMessage::STATUS_REPLY);
  EXPECT_EQ(got.getStatusReply().getVersion().size(), big.size());
}

// ---------------------------------------------------------------------------------------
// Socket path

class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    if (v != nullptr) saved_ = v;
  }
  ~EnvGuard() {
    if (saved_) {
      ::setenv(name_, saved_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(SocketPathTest, HonoursPlexusSocket) {
  EnvGuard socket_env("PLEXUS_SOCKET");
  EnvGuard xdg_env("XDG_RUNTIME_DIR");
  ASSERT_EQ(::setenv("PLEXUS_SOCKET", "/tmp/custom-plexus/test.sock", 1), 0);
  ASSERT_EQ(::setenv("XDG_RUNTIME_DIR", "/run/user/4321", 1), 0);
  EXPECT_EQ(default_socket_path(), "/tmp/custom-plexus/test.sock");
}

TEST(SocketPathTest, FallsBackWhenPlexusSocketIsUnsetOrEmpty) {
  EnvGuard socket_env("PLEXUS_SOCKET");
  EnvGuard xdg_env("XDG_RUNTIME_DIR");
  const bool root = ::geteuid() == 0;
  const std::string tmp_path = "/tmp/plexus-" + std::to_string(::geteuid()) + "/plexusd.sock";

  ASSERT_EQ(::unsetenv("PLEXUS_SOCKET"), 0);
  ASSERT_EQ(::setenv("XDG_RUNTIME_DIR", "/run/user/4321", 1), 0);
  EXPECT_EQ(default_socket_path(),
            root ? "/run/plexus/plexusd.sock" : "/run/user/4321/plexus/plexusd.sock");

  ASSERT_EQ(::setenv("PLEXUS_SOCKET", "", 1), 0);
  EXPECT_EQ(default_socket_path(),
            root ? "/run/plexus/plexusd.sock" : "/run/user/4321/plexus/plexusd.sock");

  ASSERT_EQ(::unsetenv("XDG_RUNTIME_DIR"), 0);
  EXPECT_EQ(default_socket_path(), root ? "/run/plexus/plexusd.sock" : tmp_path);
  ASSERT_EQ(::setenv("XDG_RUNTIME_DIR", "", 1), 0);
  EXPECT_EQ(default_socket_path(), root ? "/run/plexus/plexusd.sock" : tmp_path);
}

}  // namespace
}  // namespace plexus::shm
