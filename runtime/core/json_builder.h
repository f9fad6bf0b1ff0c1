// StrictJsonBuilder: the SAX handler ParseJson drives nlohmann's parser with. It builds the
// value (object keys in text order) and adds the checks nlohmann leaves out: duplicate keys,
// nesting depth, non-finite numbers. After a failed parse, error() says what and where.
#ifndef GPIPE_RUNTIME_CORE_JSON_BUILDER_H_
#define GPIPE_RUNTIME_CORE_JSON_BUILDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "runtime/core/json.h"

namespace gpipe {

class StrictJsonBuilder final : public nlohmann::json_sax<Json> {
 public:
  Json& result() { return root_; }
  // "(line 1, column 9): syntax error ..." or ": duplicate object key "w" in $.a".
  const std::string& error() const { return error_; }

  bool null() override { return Place(Json(nullptr)); }
  bool boolean(bool value) override { return Place(Json(value)); }
  bool number_integer(number_integer_t value) override { return Place(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Place(Json(value)); }
  bool number_float(number_float_t value, const string_t& literal) override;
  bool string(string_t& value) override { return Place(Json(std::move(value))); }
  bool binary(binary_t& value) override;
  bool start_object(std::size_t /*elements*/) override { return Open(Json::object()); }
  bool key(string_t& key) override;
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*elements*/) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) override;

 private:
  // An open array or object: where the next value goes.
  struct Frame {
    Json* container;
    std::string key;   // the object key the next value belongs to
    size_t index = 0;  // values placed so far
    absl::flat_hash_set<std::string> keys;
  };

  // Puts `value` at the current position; always true (the parser goes on).
  bool Place(Json value) { return PlaceAndGet(std::move(value)) != nullptr; }
  Json* PlaceAndGet(Json value);
  bool Open(Json empty);
  bool Close();
  bool Fail(std::string problem);
  // Where the innermost open container sits: "$", "$.layers[3]".
  std::string Path() const;

  Json root_;
  std::vector<Frame> frames_;
  std::string error_;
};

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_JSON_BUILDER_H_
