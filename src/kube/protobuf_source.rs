//! The watches' own requests for pods, nodes, EndpointSlices and Endpoints: a list and a watch
//! of every object that ask for protobuf (`application/vnd.kubernetes.protobuf`, as client-go's
//! controllers do) and read JSON when the server answers in JSON. Each object is converted into
//! the model as it is decoded ([`Decoded`]); the list-then-watch loop of `watch.rs` drives this
//! source as it drives kube-rs's typed API for Services.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kube::Client;
use kube::api::{ListParams, ObjectList, WatchEvent, WatchParams};
use kube::client::Body;
use kube::core::TypeMeta;
use kube::core::watch::{Bookmark, BookmarkMeta};
use kube::core::{Request, Status};
use parking_lot::Mutex;

use super::convert::ConvertError;
use super::protobuf::{self, Frames, MEDIA_TYPE};
use super::watch::Source;

mod kinds;

pub use kinds::DecodedKind;

/// Protobuf first; JSON where the server offers nothing else (an aggregated or older server).
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// An object as listed or watched: the metadata the watch loop reads (its key, uid and version),
/// and the result of its conversion into the model, taken once.
#[derive(Debug)]
pub struct Decoded<T> {
    metadata: ObjectMeta,
    object: Mutex<Option<Result<T, ConvertError>>>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

impl<T> Decoded<T> {
    /// The key, uid and version of `metadata`, and `object` converted from it.
    pub fn new(metadata: ObjectMeta, object: Result<T, ConvertError>) -> Self {
        Decoded {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                ..ObjectMeta::default()
            },
            object: Mutex::new(Some(object)),
        }
    }

    /// The same from borrowed strings (a pod decoded in place), empty ones absent.
    pub fn from_key(
        name: &str,
        namespace: &str,
        uid: &str,
        resource_version: &str,
        object: Result<T, ConvertError>,
    ) -> Self {
        Decoded {
            metadata: ObjectMeta {
                name: non_empty(name),
                namespace: non_empty(namespace),
                uid: non_empty(uid),
                resource_version: non_empty(resource_version),
                ..ObjectMeta::default()
            },
            object: Mutex::new(Some(object)),
        }
    }

    /// An object whose bytes do not even decode: reported as an invalid object.
    fn unreadable(error: ConvertError) -> Self {
        Decoded {
            metadata: ObjectMeta::default(),
            object: Mutex::new(Some(Err(error))),
        }
    }

    /// The converted object. The watch loop takes it once.
    pub fn take(&self) -> Result<T, ConvertError> {
        self.object
            .lock()
            .take()
            .unwrap_or_else(|| Err(ConvertError::new("", "the object was already taken")))
    }
}

impl<T> Decoded<T> {
    /// A k8s-openapi object converted by `convert`, under its own metadata's key.
    pub fn converted<K>(mut object: K, convert: impl FnOnce(&K) -> Result<T, ConvertError>) -> Self
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta>,
    {
        let converted = convert(&object);
        Decoded::new(std::mem::take(object.metadata_mut()), converted)
    }
}

impl<T: DecodedKind> Decoded<T> {
    fn from_json(object: &T::Json) -> Self {
        use k8s_openapi::Metadata;
        let m = object.metadata();
        let key = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..ObjectMeta::default()
        };
        Decoded::new(key, T::from_json(object))
    }
}

/// `ObjectList` asks for it; the watch loop never clones an object.
impl<T: Clone> Clone for Decoded<T> {
    fn clone(&self) -> Self {
        Decoded {
            metadata: self.metadata.clone(),
            object: Mutex::new(self.object.lock().clone()),
        }
    }
}

impl<T: DecodedKind> k8s_openapi::Resource for Decoded<T> {
    const API_VERSION: &'static str = <T::Json as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <T::Json as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <T::Json as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <T::Json as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <T::Json as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <T::Json as k8s_openapi::Resource>::Scope;
}

impl<T: DecodedKind> k8s_openapi::Metadata for Decoded<T> {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Every object of one kind, listed and watched by its own requests.
pub struct ProtobufSource<T> {
    client: Client,
    request: Request,
    /// A JSON answer was reported: an operator is told once per kind, not once per watch.
    told_json: AtomicBool,
    kind: PhantomData<fn() -> T>,
}

impl<T: DecodedKind> ProtobufSource<T> {
    pub fn new(client: Client) -> Self {
        ProtobufSource {
            client,
            request: Request::new(T::PATH),
            told_json: AtomicBool::new(false),
            kind: PhantomData,
        }
    }

    /// Sends `request` asking for protobuf; an answer that is not a success is the API's error.
    async fn send(
        &self,
        mut request: http::Request<Vec<u8>>,
    ) -> Result<(bool, http::response::Parts, Body), kube::Error> {
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(ACCEPT_PROTOBUF));
        let response = self.client.send(request.map(Body::from)).await?;
        let (parts, body) = response.into_parts();
        let protobuf = is_protobuf(&parts.headers);
        if !parts.status.is_success() {
            let bytes = body.collect().await?.to_bytes();
            return Err(api_error(parts.status.as_u16(), protobuf, &bytes));
        }
        if !protobuf && !self.told_json.swap(true, Ordering::Relaxed) {
            tracing::info!(
                path = T::PATH,
                "the API server answers in JSON, not protobuf: reading JSON (slower to decode)"
            );
        }
        Ok((protobuf, parts, body))
    }
}

fn is_protobuf(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(MEDIA_TYPE))
}

/// A decoding failure, as kube-rs reports one: the watch loop skips such an event.
fn undecodable(message: impl std::fmt::Display) -> kube::Error {
    kube::Error::SerdeError(<serde_json::Error as serde::de::Error>::custom(message))
}

fn status(code: u16, reason: &str, message: &str) -> Status {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code, "reason": reason, "message": message,
    });
    serde_json::from_value(status).unwrap_or_default()
}

/// The Status a refused request carries, in whichever encoding it came.
fn api_error(code: u16, protobuf: bool, body: &[u8]) -> kube::Error {
    let decoded = if protobuf {
        protobuf::status(body)
            .ok()
            .map(|s| status(u16::try_from(s.code).unwrap_or(code), s.reason, s.message))
    } else {
        serde_json::from_slice::<Status>(body).ok()
    };
    let status = decoded.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        status(code, "", text.trim())
    });
    kube::Error::Api(Box::new(status))
}

impl<T: DecodedKind> Source<Decoded<T>> for ProtobufSource<T> {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Decoded<T>>, kube::Error> {
        let request = self
            .request
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        let (protobuf, _, body) = self.send(request).await?;
        let bytes = body.collect().await?.to_bytes();
        if !protobuf {
            let list: ObjectList<T::Json> =
                serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
            return Ok(ObjectList {
                types: list.types,
                metadata: list.metadata,
                items: list.items.iter().map(Decoded::from_json).collect(),
            });
        }
        let list = protobuf::list(&bytes, T::LIST_KIND).map_err(undecodable)?;
        let items = list
            .items
            .iter()
            .map(|item| T::from_protobuf(item).unwrap_or_else(Decoded::unreadable))
            .collect();
        Ok(ObjectList {
            types: TypeMeta {
                api_version: <T::Json as k8s_openapi::Resource>::API_VERSION.to_string(),
                kind: T::LIST_KIND.to_string(),
            },
            metadata: ListMeta {
                continue_: non_empty(list.continue_token),
                resource_version: non_empty(list.resource_version),
                ..ListMeta::default()
            },
            items,
        })
    }

    async fn watch(
        &self,
        params: &WatchParams,
        version: &str,
    ) -> Result<BoxStream<'static, kube::Result<WatchEvent<Decoded<T>>>>, kube::Error> {
        let request = self
            .request
            .watch(params, version)
            .map_err(kube::Error::BuildRequest)?;
        let (protobuf, _, body) = self.send(request).await?;
        let reader = Reader::<T>::new(protobuf);
        let state = (body.into_data_stream(), reader, false);
        Ok(
            futures::stream::unfold(state, |(mut data, mut reader, ended)| async move {
                // After a broken framing or body nothing more can be read: the watch resumes.
                if ended {
                    return None;
                }
                loop {
                    match reader.next_event() {
                        Some(Ok(event)) => return Some((Ok(event), (data, reader, false))),
                        // A frame that does not decode is skipped; a broken framing ends the
                        // stream.
                        Some(Err(Broken::Event(e))) => {
                            return Some((Err(e), (data, reader, false)));
                        }
                        Some(Err(Broken::Stream(e))) => {
                            return Some((Err(e), (data, reader, true)));
                        }
                        None => {}
                    }
                    match data.next().await {
                        Some(Ok(chunk)) => reader.push(&chunk),
                        Some(Err(e)) => return Some((Err(e), (data, reader, true))),
                        None => return None,
                    }
                }
            })
            .boxed(),
        )
    }
}

/// Why no event came out of the bytes.
enum Broken {
    /// This event does not decode; the next may.
    Event(kube::Error),
    /// Nothing after this can be read.
    Stream(kube::Error),
}

/// A watch body, as protobuf frames or JSON lines.
enum WatchBody {
    Protobuf(Frames),
    Json(Lines),
}

/// A watch body read into events of `T`.
struct Reader<T> {
    body: WatchBody,
    kind: PhantomData<fn() -> T>,
}

impl<T: DecodedKind> Reader<T> {
    fn new(protobuf: bool) -> Self {
        let body = if protobuf {
            WatchBody::Protobuf(Frames::default())
        } else {
            WatchBody::Json(Lines::default())
        };
        Reader {
            body,
            kind: PhantomData,
        }
    }

    fn push(&mut self, chunk: &Bytes) {
        match &mut self.body {
            WatchBody::Protobuf(frames) => frames.push(chunk),
            WatchBody::Json(lines) => lines.push(chunk),
        }
    }

    fn next_event(&mut self) -> Option<Result<WatchEvent<Decoded<T>>, Broken>> {
        match &mut self.body {
            WatchBody::Protobuf(frames) => match frames.next_frame() {
                Ok(Some(frame)) => Some(protobuf_event(frame).map_err(Broken::Event)),
                Ok(None) => None,
                Err(e) => Some(Err(Broken::Stream(undecodable(e)))),
            },
            WatchBody::Json(lines) => {
                let line = lines.next_line()?;
                Some(
                    serde_json::from_slice::<WatchEvent<T::Json>>(line)
                        .map(|event| match event {
                            WatchEvent::Added(o) => WatchEvent::Added(Decoded::from_json(&o)),
                            WatchEvent::Modified(o) => WatchEvent::Modified(Decoded::from_json(&o)),
                            WatchEvent::Deleted(o) => WatchEvent::Deleted(Decoded::from_json(&o)),
                            WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
                            WatchEvent::Error(s) => WatchEvent::Error(s),
                        })
                        .map_err(|e| Broken::Event(kube::Error::SerdeError(e))),
                )
            }
        }
    }
}

/// One protobuf watch event, its object converted.
fn protobuf_event<T: DecodedKind>(frame: &[u8]) -> Result<WatchEvent<Decoded<T>>, kube::Error> {
    let event = protobuf::watch_event(frame).map_err(undecodable)?;
    let object = || {
        let kind = <T::Json as k8s_openapi::Resource>::KIND;
        let message = protobuf::object_of_kind(event.object, kind).map_err(undecodable)?;
        T::from_protobuf(message).map_err(undecodable)
    };
    Ok(match event.event_type {
        "ADDED" => WatchEvent::Added(object()?),
        "MODIFIED" => WatchEvent::Modified(object()?),
        "DELETED" => WatchEvent::Deleted(object()?),
        "BOOKMARK" => WatchEvent::Bookmark(Bookmark {
            types: TypeMeta {
                api_version: <T::Json as k8s_openapi::Resource>::API_VERSION.to_string(),
                kind: <T::Json as k8s_openapi::Resource>::KIND.to_string(),
            },
            metadata: BookmarkMeta {
                resource_version: object()?.metadata.resource_version.unwrap_or_default(),
                annotations: Default::default(),
            },
        }),
        "ERROR" => {
            let s = protobuf::status(event.object).map_err(undecodable)?;
            WatchEvent::Error(Box::new(status(
                u16::try_from(s.code).unwrap_or(500),
                s.reason,
                s.message,
            )))
        }
        other => return Err(undecodable(format!("unknown watch event type {other:?}"))),
    })
}

/// A JSON watch body's lines, taken as the body's chunks arrive.
#[derive(Debug, Default)]
struct Lines {
    buf: Vec<u8>,
    start: usize,
}

impl Lines {
    fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    fn next_line(&mut self) -> Option<&[u8]> {
        loop {
            let pending = &self.buf[self.start..];
            let end = pending.iter().position(|&b| b == b'\n')?;
            let from = self.start;
            self.start += end + 1;
            if !self.buf[from..from + end]
                .iter()
                .all(u8::is_ascii_whitespace)
            {
                return Some(&self.buf[from..from + end]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Pod;

    #[test]
    fn json_lines_across_chunks_blank_lines_skipped() {
        let mut lines = Lines::default();
        lines.push(b"{\"a\":1}\n\n{\"b\"");
        assert_eq!(lines.next_line(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(lines.next_line(), None);
        lines.push(b":2}\n");
        assert_eq!(lines.next_line(), Some(&b"{\"b\":2}"[..]));
        assert_eq!(lines.next_line(), None);
    }

    #[test]
    fn a_json_watch_line_is_a_converted_pod() {
        let mut reader = Reader::<Pod>::new(false);
        reader.push(&Bytes::from_static(
            b"{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\
              \"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"}}}\n\
              not json\n",
        ));
        match reader.next_event() {
            Some(Ok(WatchEvent::Modified(pod))) => {
                assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
                assert_eq!(
                    pod.take().map(|p| p.meta.name.to_string()),
                    Ok("p".to_string())
                );
                assert!(pod.take().is_err(), "taken once");
            }
            other => panic!("{:?}", other.map(|r| r.map_err(|_| ()))),
        }
        // A line that does not decode spoils only itself.
        assert!(matches!(reader.next_event(), Some(Err(Broken::Event(_)))));
        assert!(reader.next_event().is_none());
    }

    #[test]
    fn a_broken_protobuf_framing_ends_the_stream() {
        let mut reader = Reader::<Pod>::new(true);
        reader.push(&Bytes::copy_from_slice(&u32::MAX.to_be_bytes()));
        assert!(matches!(reader.next_event(), Some(Err(Broken::Stream(_)))));
    }

    #[test]
    fn refusals_are_read_in_either_encoding() {
        let json = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired","message":"too old"}"#;
        match api_error(410, false, json) {
            kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
            other => panic!("{other}"),
        }
        let mut protobuf = b"k8s\0".to_vec();
        {
            use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
            use k8s_pb::apimachinery::pkg::runtime;
            use prost::Message;
            let status = meta::Status {
                code: Some(410),
                reason: Some("Expired".to_string()),
                message: Some("too old".to_string()),
                ..Default::default()
            };
            runtime::Unknown {
                type_meta: Some(runtime::TypeMeta {
                    api_version: Some("v1".to_string()),
                    kind: Some("Status".to_string()),
                }),
                raw: Some(status.encode_to_vec()),
                ..Default::default()
            }
            .encode(&mut protobuf)
            .unwrap_or_else(|e| panic!("{e}"));
        }
        match api_error(500, true, &protobuf) {
            kube::Error::Api(s) => {
                assert_eq!(
                    (s.code, s.reason.as_str(), s.message.as_str()),
                    (410, "Expired", "too old")
                );
            }
            other => panic!("{other}"),
        }
        match api_error(502, false, b"<html>bad gateway</html>") {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 502);
                assert!(s.message.contains("bad gateway"));
            }
            other => panic!("{other}"),
        }
    }
}
