#include <utility>

#include "google/protobuf/text_format.h"
#include "gpipe/plan.h"

namespace gpipe {

PlanSource PlanSource::File(std::string path) {
  PlanSource source;
  source.is_file_ = true;
  source.path_or_name_ = std::move(path);
  return source;
}

PlanSource PlanSource::Text(std::string text, std::string name, std::string directory) {
  PlanSource source;
  source.path_or_name_ = std::move(name);
  source.text_ = std::move(text);
  source.directory_ = std::move(directory);
  return source;
}

PlanSource PlanSource::Proto(const pb::Plan& plan, std::string name, std::string directory) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(plan, &text);
  return Text(std::move(text), std::move(name), std::move(directory));
}

PlanSource& PlanSource::Override(std::string fragment) & {
  overrides_.push_back(std::move(fragment));
  return *this;
}

PlanSource&& PlanSource::Override(std::string fragment) && {
  overrides_.push_back(std::move(fragment));
  return std::move(*this);
}

}  // namespace gpipe
