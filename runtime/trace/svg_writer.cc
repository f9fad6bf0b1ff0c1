#include "runtime/trace/svg_writer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpipe::trace {
namespace {

constexpr char kFontFamily[] = "DejaVu Sans, Helvetica, Arial, sans-serif";

}  // namespace

std::string EscapeXml(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even as references.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

double EstimateTextWidth(absl::string_view text, double size) {
  // DejaVu Sans averages about 0.6 em per character in digits and lower case.
  return 0.62 * size * static_cast<double>(text.size());
}

SvgWriter::SvgWriter(double width, double height) {
  absl::StrAppendFormat(&out_,
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                        "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\">\n",
                        width, height, width, height, kFontFamily);
  absl::StrAppendFormat(&out_,
                        "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
                        width, height);
}

void SvgWriter::Rect(double x, double y, double width, double height, absl::string_view fill,
                     absl::string_view css_class, absl::string_view tooltip,
                     absl::string_view stroke, double stroke_width) {
  absl::StrAppendFormat(&out_,
                        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x,
                        y, width, height, EscapeXml(fill));
  if (!css_class.empty()) absl::StrAppend(&out_, " class=\"", EscapeXml(css_class), "\"");
  if (!stroke.empty()) {
    absl::StrAppendFormat(&out_, " stroke=\"%s\" stroke-width=\"%.2f\"", EscapeXml(stroke),
                          stroke_width);
  }
  if (tooltip.empty()) {
    absl::StrAppend(&out_, "/>\n");
  } else {
    absl::StrAppend(&out_, "><title>", EscapeXml(tooltip), "</title></rect>\n");
  }
}

void SvgWriter::Line(double x1, double y1, double x2, double y2, absl::string_view stroke,
                     double stroke_width) {
  absl::StrAppendFormat(&out_,
                        "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                        "stroke-width=\"%.2f\"/>\n",
                        x1, y1, x2, y2, EscapeXml(stroke), stroke_width);
}

void SvgWriter::Text(double x, double y, absl::string_view text, const SvgTextStyle& style,
                     absl::string_view css_class) {
  // The baseline sits about 0.35 em below the middle of digits and capitals; computed here
  // rather than with dominant-baseline, which not every renderer supports.
  absl::StrAppendFormat(&out_,
                        "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\" "
                        "fill=\"%s\"",
                        x, y + 0.35 * style.size, style.size, style.anchor, style.fill);
  if (style.bold) absl::StrAppend(&out_, " font-weight=\"bold\"");
  if (!css_class.empty()) absl::StrAppend(&out_, " class=\"", EscapeXml(css_class), "\"");
  absl::StrAppend(&out_, ">", EscapeXml(text), "</text>\n");
}

std::string SvgWriter::Finish() {
  absl::StrAppend(&out_, "</svg>\n");
  return std::move(out_);
}

}  // namespace gpipe::trace
