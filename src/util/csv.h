// CSV as RFC 4180 writes it: one header, the same number of fields on every record, CRLF line ends,
// and every string quoted with its quotes doubled, so Python's csv, pandas and spreadsheets agree.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace poslab {

// "a,b" -> "\"a,b\"", "say \"hi\"" -> "\"say \"\"hi\"\"\"".
inline std::string csv_quote(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// A JSON value as one field: null -> empty, booleans -> true/false, numbers as JSON writes them
// (they read back to the same double), strings quoted.
inline std::string csv_field(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return csv_quote(v.get<std::string>());
  if (v.is_number_float() && v.get<double>() == 0) return "0";  // never "-0"
  return v.dump();
}

inline std::string csv_record(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + fields[i];
  return out + "\r\n";
}

}  // namespace poslab
