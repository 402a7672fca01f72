//! EndpointSlice mirroring: the custom Endpoints of selector-less Services copied into EndpointSlices.
