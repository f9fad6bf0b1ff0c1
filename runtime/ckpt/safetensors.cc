#include "runtime/ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/ckpt/crc32.h"
#include "runtime/core/bf16.h"
#include "runtime/core/file_io.h"
#include "runtime/core/json.h"
#include "runtime/core/json_fields.h"
#include "runtime/core/status_macros.h"

namespace gpipe {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors reading and writing assume a little-endian host");

constexpr char kMetadataKey[] = "__metadata__";
// product(shape), or nullopt on a negative dimension or int64 overflow of product * 4.
std::optional<int64_t> ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / 4 / d) return std::nullopt;
    count *= d;
  }
  return count;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status Invalid(const std::string& source, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": not a valid safetensors file: ", problem));
}

// Writes all of `bytes` to `fd`, retrying on short writes and EINTR.
// Bytes per element of a dtype gpipe reads (F32, BF16, F16); 0 for any other.
int DtypeWidth(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

// One header entry: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}.
absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& source, const std::string& name,
                                            const Json& entry) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!entry.is_object()) {
    return Invalid(source, absl::StrCat(where, " is a JSON ", entry.type_name(),
                                        ", expected an object with dtype, shape, data_offsets"));
  }
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Invalid(source, absl::StrCat(where, " has an unknown field \"", key, "\""));
    }
  }
  const Json* dtype = JsonFind(entry, "dtype");
  const Json* shape = JsonFind(entry, "shape");
  const Json* offsets = JsonFind(entry, "data_offsets");
  if (dtype == nullptr || shape == nullptr || offsets == nullptr) {
    return Invalid(source, absl::StrCat(where, " lacks one of dtype, shape, data_offsets"));
  }
  if (!dtype->is_string()) return Invalid(source, absl::StrCat(where, ": dtype is not a string"));
  SafetensorsEntry info;
  info.name = name;
  info.dtype = dtype->get_ref<const std::string&>();
  const int width = DtypeWidth(info.dtype);
  if (width == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", where, " has dtype ", info.dtype,
                     "; gpipe reads F32, BF16 and F16 tensors (as f32): save it as one of "
                     "them, e.g. tensor.float()"));
  }
  if (!shape->is_array()) return Invalid(source, absl::StrCat(where, ": shape is not an array"));
  for (const Json& dim : *shape) {
    const std::optional<int64_t> d = JsonAsInt64(dim);
    if (!d.has_value() || *d < 0) {
      return Invalid(source, absl::StrCat(where, ": shape entries must be non-negative integers"));
    }
    info.shape.push_back(*d);
  }
  const std::optional<int64_t> count = ElementCount(info.shape);
  if (!count.has_value()) {
    return Invalid(source, absl::StrCat(where, ": shape ", ShapeText(info.shape), " is too large"));
  }
  info.count = *count;
  if (!offsets->is_array() || offsets->size() != 2) {
    return Invalid(source, absl::StrCat(where, ": data_offsets must be [begin, end]"));
  }
  const std::optional<int64_t> begin = JsonAsInt64((*offsets)[0]);
  const std::optional<int64_t> end = JsonAsInt64((*offsets)[1]);
  if (!begin.has_value() || !end.has_value() || *begin < 0 || *end < *begin) {
    return Invalid(source,
                   absl::StrCat(where, ": data_offsets must be integers with 0 <= begin <= end"));
  }
  info.begin = static_cast<uint64_t>(*begin);
  info.end = static_cast<uint64_t>(*end);
  if (info.end - info.begin != static_cast<uint64_t>(info.count) * width) {
    return Invalid(source,
                   absl::StrCat(where, ": data_offsets [", info.begin, ", ", info.end, ") hold ",
                                info.end - info.begin, " bytes but shape ", ShapeText(info.shape),
                                " of ", info.dtype, " needs ", info.count * width));
  }
  return info;
}

// IEEE binary16 to f32, exactly (subnormals, infinities and NaNs included).
float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // 127 - 15 = 112
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // A subnormal: shift the mantissa up until its leading one is the implicit bit.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// The entry's elements at `from` (little-endian) as f32 into `to`.
void Widen(const SafetensorsEntry& entry, const char* from, float* to) {
  if (entry.dtype == "F32") {
    std::memcpy(to, from, static_cast<size_t>(entry.count) * 4);
    return;
  }
  const bool bf16 = entry.dtype == "BF16";
  for (int64_t i = 0; i < entry.count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, from + i * 2, 2);
    to[i] = bf16 ? FromBf16(bits) : HalfToFloat(bits);
  }
}

}  // namespace

absl::StatusOr<WrittenFile> WriteSafetensors(const std::string& path,
                                             const std::vector<NamedTensorData>& tensors,
                                             const std::map<std::string, std::string>& metadata,
                                             SafetensorsDtype dtype) {
  const bool bf16 = dtype == SafetensorsDtype::kBF16;
  const uint64_t width = bf16 ? 2 : 4;
  std::set<std::string> names;
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const NamedTensorData& tensor : tensors) {
    if (tensor.name == kMetadataKey) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write ", path, ": \"__metadata__\" is reserved and cannot name a tensor"));
    }
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": duplicate tensor name \"", tensor.name, "\""));
    }
    const std::optional<int64_t> count = ElementCount(tensor.shape);
    if (!count.has_value() || static_cast<uint64_t>(*count) != tensor.values.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": tensor \"", tensor.name, "\" has shape ",
                       ShapeText(tensor.shape), " but ", tensor.values.size(), " values"));
    }
    const uint64_t bytes = static_cast<uint64_t>(*count) * width;
    header[tensor.name] = {{"dtype", bf16 ? "BF16" : "F32"},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  // Invalid UTF-8 would be written as U+FFFD: refuse it rather than rename tensors silently.
  for (const NamedTensorData& tensor : tensors) {
    RETURN_IF_ERROR(CheckUtf8(
        tensor.name, absl::StrCat("cannot write ", path,
                                  ": tensor names and metadata must be valid UTF-8 (tensor '",
                                  absl::CHexEscape(tensor.name), "')")));
  }
  for (const auto& [key, value] : metadata) {
    const std::string what = absl::StrCat(
        "cannot write ", path, ": tensor names and metadata must be valid UTF-8 (metadata '",
        absl::CHexEscape(key), "')");
    RETURN_IF_ERROR(CheckUtf8(key, what));
    RETURN_IF_ERROR(CheckUtf8(value, what));
  }
  std::string text = DumpJson(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": the header is ",
                                                   text.size(),
                                                   " bytes, more than readers "
                                                   "accept (",
                                                   kMaxSafetensorsHeaderBytes, ")"));
  }
  char length[8];
  const uint64_t header_size = text.size();
  std::memcpy(length, &header_size, 8);

  std::vector<absl::string_view> pieces = {absl::string_view(length, 8), text};
  // BF16: every tensor rounded into one buffer the pieces point into.
  std::vector<uint16_t> rounded;
  if (bf16) {
    rounded.reserve(offset / 2);
    for (const NamedTensorData& tensor : tensors) {
      for (float value : tensor.values) rounded.push_back(ToBf16(value));
    }
  }
  uint64_t at = 0;
  for (const NamedTensorData& tensor : tensors) {
    if (bf16) {
      pieces.emplace_back(reinterpret_cast<const char*>(rounded.data() + at),
                          tensor.values.size() * 2);
      at += tensor.values.size();
    } else {
      pieces.emplace_back(reinterpret_cast<const char*>(tensor.values.data()),
                          tensor.values.size() * sizeof(float));
    }
  }
  RETURN_IF_ERROR(WriteFileAtomically(path, pieces));
  WrittenFile written;
  for (absl::string_view piece : pieces) written.bytes += static_cast<int64_t>(piece.size());
  written.crc32 = Crc32(pieces);
  return written;
}

absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(absl::string_view bytes,
                                                         const std::string& source) {
  if (bytes.size() < 8) {
    return Invalid(source, absl::StrCat("the file is ", bytes.size(),
                                        " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return Invalid(source,
                   absl::StrCat("the header length is ", header_size,
                                " bytes, more than the limit of ", kMaxSafetensorsHeaderBytes));
  }
  if (header_size > bytes.size() - 8) {
    return Invalid(source, absl::StrCat("the header length is ", header_size, " bytes but only ",
                                        bytes.size() - 8, " bytes follow it (truncated file?)"));
  }
  const absl::string_view header_text = bytes.substr(8, header_size);
  if (header_text.empty() || header_text[0] != '{') {
    return Invalid(source, "the header does not start with '{'");
  }
  absl::StatusOr<Json> header = ParseJson(header_text, "the header");
  if (!header.ok()) return Invalid(source, header.status().message());
  if (!header->is_object()) return Invalid(source, "the header is not a JSON object");

  SafetensorsLayout layout;
  std::vector<SafetensorsEntry>& entries = layout.entries;
  for (const auto& [name, value] : header->items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) return Invalid(source, "__metadata__ is not an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          return Invalid(source,
                         absl::StrCat("__metadata__ value of \"", key, "\" is not a string"));
        }
        layout.metadata[key] = text.get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(source, name, value));
    entries.push_back(std::move(entry));
  }

  const absl::string_view data = bytes.substr(8 + header_size);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
                   });
  uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& entry : entries) {
    if (entry.end > data.size()) {
      return Invalid(
          source, absl::StrCat("tensor \"", entry.name, "\" has data_offsets [", entry.begin, ", ",
                               entry.end, ") past the end of the data (", data.size(), " bytes)"));
    }
    if (entry.begin < covered) {
      return Invalid(source, absl::StrCat("the data of tensors \"", previous->name, "\" and \"",
                                          entry.name, "\" overlap"));
    }
    if (entry.begin > covered) {
      return Invalid(source, absl::StrCat("bytes [", covered, ", ", entry.begin,
                                          ") of the data belong to no tensor"));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data.size()) {
    return Invalid(source, absl::StrCat(data.size() - covered, " bytes at the end of the data ",
                                        "belong to no tensor"));
  }
  layout.data_start = 8 + header_size;
  return layout;
}

NamedTensorData ReadSafetensorsEntry(absl::string_view bytes, const SafetensorsLayout& layout,
                                     const SafetensorsEntry& entry) {
  NamedTensorData tensor{entry.name, entry.shape, std::vector<float>(entry.count)};
  if (entry.count > 0) {
    Widen(entry, bytes.data() + layout.data_start + entry.begin, tensor.values.data());
  }
  return tensor;
}

absl::StatusOr<SafetensorsContents> ParseSafetensors(absl::string_view bytes,
                                                     const std::string& source) {
  ASSIGN_OR_RETURN(const SafetensorsLayout layout, ParseSafetensorsLayout(bytes, source));
  SafetensorsContents contents;
  contents.metadata = layout.metadata;
  contents.tensors.reserve(layout.entries.size());
  for (const SafetensorsEntry& entry : layout.entries) {
    contents.tensors.push_back(ReadSafetensorsEntry(bytes, layout, entry));
  }
  return contents;
}

absl::StatusOr<SafetensorsContents> ReadSafetensorsWithMetadata(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  return ParseSafetensors(bytes, path);
}

absl::StatusOr<std::vector<NamedTensorData>> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(SafetensorsContents contents, ReadSafetensorsWithMetadata(path));
  return std::move(contents.tensors);
}

}  // namespace gpipe
