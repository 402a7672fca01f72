//! Property tests against independent oracles: the EndpointSlice reconciler on random services,
//! pods and earlier slices (`slices`), and fuzzing of the decoders and reconcilers (`fuzz`).

mod fuzz;
mod slices;
