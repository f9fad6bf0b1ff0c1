// gpipe/gpipe.h — the whole embedding API in one include: Runtime (gpipe/runtime.h), PlanSource
// (gpipe/plan.h), Extensions with custom layers and data sources (gpipe/extensions.h,
// gpipe/custom_layer.h, gpipe/data_source.h), Callbacks and metrics (gpipe/callbacks.h,
// gpipe/metrics.h) and the version (gpipe/version.h). Each header states its contract.
#ifndef GPIPE_GPIPE_H_
#define GPIPE_GPIPE_H_

#include "gpipe/callbacks.h"
#include "gpipe/custom_layer.h"
#include "gpipe/data_source.h"
#include "gpipe/extensions.h"
#include "gpipe/metrics.h"
#include "gpipe/plan.h"
#include "gpipe/runtime.h"
#include "gpipe/version.h"

#endif  // GPIPE_GPIPE_H_
