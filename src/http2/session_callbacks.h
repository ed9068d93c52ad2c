// The nghttp2 callbacks of a Connection (http2 layer, private): how nghttp2's events reach the
// connection's streams, and how its output reaches the connection's write queue.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <span>

#include "absl/container/inlined_vector.h"
#include "http2/connection.h"

namespace ferry::http2 {

struct Connection::Callbacks {
  // The callback table every session shares (static storage).
  static nghttp2_session_callbacks* table();
  // The data provider of a stream's outbound queue.
  static ssize_t read_data(nghttp2_session* session, std::int32_t, std::uint8_t*,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void*);

  static ssize_t send(nghttp2_session*, const std::uint8_t* data, std::size_t length, int,
                      void* user_data);
  static int send_data(nghttp2_session*, nghttp2_frame* frame, const std::uint8_t* framehd,
                       std::size_t length, nghttp2_data_source* source, void* user_data);
  static int begin_frame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* user_data);
  static int begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                    std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                    std::uint8_t, void* user_data);
  static int frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t stream_id,
                        const std::uint8_t* data, std::size_t len, void* user_data);
  static int stream_close(nghttp2_session* session, std::int32_t stream_id, std::uint32_t error,
                          void* user_data);
  static int frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
};

// Header fields as nghttp2 takes them; fields of static storage are flagged so that nghttp2
// keeps the pointers, the rest are copied by the submit call.
using NvArray = absl::InlinedVector<nghttp2_nv, 16>;
nghttp2_nv to_nv(const HeaderField& field);
void append_nv(std::span<const HeaderField> fields, NvArray& out);

}  // namespace ferry::http2
