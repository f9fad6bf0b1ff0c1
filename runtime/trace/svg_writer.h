// SvgWriter: builds one self-contained SVG document from rectangles, lines and text, escaping
// every piece of text and attribute value, so pictures (svg_timeline.h) deal in geometry and
// never in markup. Coordinates are pixels, written with two decimals. Not thread-safe.
#ifndef GPIPE_RUNTIME_TRACE_SVG_WRITER_H_
#define GPIPE_RUNTIME_TRACE_SVG_WRITER_H_

#include <string>

#include "absl/strings/string_view.h"

namespace gpipe::trace {

// `text` with &, <, >, " and ' replaced by entities: safe as element text and attribute value.
std::string EscapeXml(absl::string_view text);

struct SvgTextStyle {
  double size = 12;
  const char* anchor = "start";  // "start", "middle", "end"
  const char* fill = "#222222";
  bool bold = false;
};

class SvgWriter {
 public:
  // A white background covers the whole canvas, so rasterized copies are not transparent.
  SvgWriter(double width, double height);

  // `css_class` (may be empty) lets readers and tests find elements; `tooltip` (may be empty)
  // becomes a <title> child that viewers show on hover.
  void Rect(double x, double y, double width, double height, absl::string_view fill,
            absl::string_view css_class = "", absl::string_view tooltip = "",
            absl::string_view stroke = "", double stroke_width = 0);
  void Line(double x1, double y1, double x2, double y2, absl::string_view stroke,
            double stroke_width = 1);
  // `y` is the text's vertical middle.
  void Text(double x, double y, absl::string_view text, const SvgTextStyle& style,
            absl::string_view css_class = "");

  // The finished document; the writer is spent.
  std::string Finish();

 private:
  std::string out_;
};

// Rough rendered width of `text` in a sans-serif font of `size` px, for fitting labels.
double EstimateTextWidth(absl::string_view text, double size);

}  // namespace gpipe::trace

#endif  // GPIPE_RUNTIME_TRACE_SVG_WRITER_H_
