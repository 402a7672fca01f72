//! The pod watch's own requests: a list and a watch of every pod that ask for protobuf
//! (`application/vnd.kubernetes.protobuf`, as client-go's controllers do) and read JSON when the
//! server answers in JSON. Each pod is converted as it is decoded ([`DecodedPod`]); the
//! list-then-watch loop of `watch.rs` drives this source as it drives kube-rs's typed API for the
//! other kinds.

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

use super::convert::{ConvertError, PodFields, WatchedPod, pod_from_fields, pod_from_watched};
use super::protobuf::{self, Frames, MEDIA_TYPE};
use super::watch::Source;
use crate::model::Pod;

/// Protobuf first; JSON where the server offers nothing else (an aggregated or older server).
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// A pod as listed or watched: the metadata the watch loop reads (its key, uid and version), and
/// the result of its conversion, taken once.
#[derive(Debug, Default)]
pub struct DecodedPod {
    metadata: ObjectMeta,
    pod: Mutex<Option<Result<Pod, ConvertError>>>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

impl DecodedPod {
    fn from_fields(fields: &PodFields<'_>) -> Self {
        DecodedPod {
            metadata: ObjectMeta {
                name: non_empty(fields.name),
                namespace: non_empty(fields.namespace),
                uid: non_empty(fields.uid),
                resource_version: non_empty(fields.resource_version),
                ..ObjectMeta::default()
            },
            pod: Mutex::new(Some(pod_from_fields(fields))),
        }
    }

    fn from_watched(pod: &WatchedPod) -> Self {
        let m = &pod.metadata;
        DecodedPod {
            metadata: ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                ..ObjectMeta::default()
            },
            pod: Mutex::new(Some(pod_from_watched(pod))),
        }
    }

    /// A list item whose bytes do not even decode: reported as an invalid object.
    fn unreadable(error: ConvertError) -> Self {
        DecodedPod {
            metadata: ObjectMeta::default(),
            pod: Mutex::new(Some(Err(error))),
        }
    }

    /// The converted pod. The watch loop takes it once.
    pub fn take(&self) -> Result<Pod, ConvertError> {
        self.pod
            .lock()
            .take()
            .unwrap_or_else(|| Err(ConvertError::new("", "the pod was already taken")))
    }
}

/// `ObjectList` asks for it; the watch loop never clones a pod.
impl Clone for DecodedPod {
    fn clone(&self) -> Self {
        DecodedPod {
            metadata: self.metadata.clone(),
            pod: Mutex::new(self.pod.lock().clone()),
        }
    }
}

impl k8s_openapi::Resource for DecodedPod {
    const API_VERSION: &'static str = <WatchedPod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <WatchedPod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <WatchedPod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <WatchedPod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <WatchedPod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for DecodedPod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Every pod, listed and watched by its own requests.
pub struct PodSource {
    client: Client,
    request: Request,
}

impl PodSource {
    pub fn new(client: Client) -> Self {
        PodSource {
            client,
            request: Request::new("/api/v1/pods"),
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

impl Source<DecodedPod> for PodSource {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<DecodedPod>, kube::Error> {
        let request = self
            .request
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        let (protobuf, _, body) = self.send(request).await?;
        let bytes = body.collect().await?.to_bytes();
        if !protobuf {
            let list: ObjectList<WatchedPod> =
                serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
            return Ok(ObjectList {
                types: list.types,
                metadata: list.metadata,
                items: list.items.iter().map(DecodedPod::from_watched).collect(),
            });
        }
        let list = protobuf::list(&bytes, "PodList").map_err(undecodable)?;
        let items = list
            .items
            .iter()
            .map(|item| match protobuf::pod_fields(item) {
                Ok(fields) => DecodedPod::from_fields(&fields),
                Err(error) => DecodedPod::unreadable(error),
            })
            .collect();
        Ok(ObjectList {
            types: TypeMeta {
                api_version: "v1".to_string(),
                kind: "PodList".to_string(),
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
    ) -> Result<BoxStream<'static, kube::Result<WatchEvent<DecodedPod>>>, kube::Error> {
        let request = self
            .request
            .watch(params, version)
            .map_err(kube::Error::BuildRequest)?;
        let (protobuf, _, body) = self.send(request).await?;
        let reader = if protobuf {
            Reader::Protobuf(Frames::default())
        } else {
            Reader::Json(Lines::default())
        };
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
enum Reader {
    Protobuf(Frames),
    Json(Lines),
}

impl Reader {
    fn push(&mut self, chunk: &Bytes) {
        match self {
            Reader::Protobuf(frames) => frames.push(chunk),
            Reader::Json(lines) => lines.push(chunk),
        }
    }

    fn next_event(&mut self) -> Option<Result<WatchEvent<DecodedPod>, Broken>> {
        match self {
            Reader::Protobuf(frames) => match frames.next_frame() {
                Ok(Some(frame)) => Some(protobuf_event(frame).map_err(Broken::Event)),
                Ok(None) => None,
                Err(e) => Some(Err(Broken::Stream(undecodable(e)))),
            },
            Reader::Json(lines) => {
                let line = lines.next_line()?;
                Some(
                    serde_json::from_slice::<WatchEvent<WatchedPod>>(line)
                        .map(|event| match event {
                            WatchEvent::Added(p) => WatchEvent::Added(DecodedPod::from_watched(&p)),
                            WatchEvent::Modified(p) => {
                                WatchEvent::Modified(DecodedPod::from_watched(&p))
                            }
                            WatchEvent::Deleted(p) => {
                                WatchEvent::Deleted(DecodedPod::from_watched(&p))
                            }
                            WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
                            WatchEvent::Error(s) => WatchEvent::Error(s),
                        })
                        .map_err(|e| Broken::Event(kube::Error::SerdeError(e))),
                )
            }
        }
    }
}

/// One protobuf watch event, its pod converted.
fn protobuf_event(frame: &[u8]) -> Result<WatchEvent<DecodedPod>, kube::Error> {
    let event = protobuf::watch_event(frame).map_err(undecodable)?;
    let pod = || protobuf::pod_object(event.object).map_err(undecodable);
    Ok(match event.event_type {
        "ADDED" => WatchEvent::Added(DecodedPod::from_fields(&pod()?)),
        "MODIFIED" => WatchEvent::Modified(DecodedPod::from_fields(&pod()?)),
        "DELETED" => WatchEvent::Deleted(DecodedPod::from_fields(&pod()?)),
        "BOOKMARK" => WatchEvent::Bookmark(Bookmark {
            types: TypeMeta {
                api_version: "v1".to_string(),
                kind: "Pod".to_string(),
            },
            metadata: BookmarkMeta {
                resource_version: pod()?.resource_version.to_string(),
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
        let mut reader = Reader::Json(Lines::default());
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
        let mut reader = Reader::Protobuf(Frames::default());
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
