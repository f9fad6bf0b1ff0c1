// gpipe/extensions.h — the custom layers and data sources one runtime knows.
//
// Contract: an Extensions object starts with every built-in layer and no custom data source;
// the program adds its own, then passes it to Runtime::Create, which copies it (the object may be
// changed or destroyed afterwards without affecting that runtime). Every rank must register the
// same types and sources. Two runtimes may have different extensions. Registering is not
// thread-safe; a filled object may be read from several threads.
#ifndef GPIPE_EXTENSIONS_H_
#define GPIPE_EXTENSIONS_H_

#include <string>

#include "absl/status/status.h"
#include "gpipe/custom_layer.h"
#include "gpipe/data_source.h"
#include "layers/registry.h"
#include "runtime/data/data_source_registry.h"

namespace gpipe {

class Extensions {
 public:
  Extensions();

  // INVALID_ARGUMENT for an empty type or a missing CPU factory; ALREADY_EXISTS for a type
  // registered before.
  absl::Status AddLayer(CustomLayerType layer);
  // INVALID_ARGUMENT for an empty name or a null factory; ALREADY_EXISTS for a name registered
  // before.
  absl::Status AddDataSource(std::string name, CustomDataFactory factory);

  const LayerRegistry& layers() const { return layers_; }
  const DataSourceRegistry& data_sources() const { return data_sources_; }

 private:
  LayerRegistry layers_;
  DataSourceRegistry data_sources_;
};

}  // namespace gpipe

#endif  // GPIPE_EXTENSIONS_H_
