//! Controller state about earlier writes: the EndpointSlice generation tracker and trigger times.
