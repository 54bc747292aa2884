// Filter implementations shared between filters.cc (text and number
// filters, the dispatch table) and filters_sequence.cc (list filters).
#pragma once

#include <string>

#include "jinja/render.h"

namespace tokenmill::jinja {

using FilterFn = Value (*)(Renderer&, const Value&, CallArgs&);

// Follows a dotted attribute path ("a.b", "0.name") as jinja2's attribute= arguments do.
Value follow_attribute(const Value& v, const Value& path);
// The sort key jinja2 uses: strings lowercased unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive);

Value filter_map(Renderer& r, const Value& v, CallArgs& a);
Value filter_select(Renderer& r, const Value& v, CallArgs& a);
Value filter_reject(Renderer& r, const Value& v, CallArgs& a);
Value filter_selectattr(Renderer& r, const Value& v, CallArgs& a);
Value filter_rejectattr(Renderer& r, const Value& v, CallArgs& a);
Value filter_sort(Renderer& r, const Value& v, CallArgs& a);
Value filter_dictsort(Renderer& r, const Value& v, CallArgs& a);
Value filter_unique(Renderer& r, const Value& v, CallArgs& a);
Value filter_min(Renderer& r, const Value& v, CallArgs& a);
Value filter_max(Renderer& r, const Value& v, CallArgs& a);
Value filter_sum(Renderer& r, const Value& v, CallArgs& a);
Value filter_join(Renderer& r, const Value& v, CallArgs& a);
Value filter_groupby(Renderer& r, const Value& v, CallArgs& a);
Value filter_batch(Renderer& r, const Value& v, CallArgs& a);
Value filter_tojson(Renderer& r, const Value& v, CallArgs& a);

}  // namespace tokenmill::jinja
