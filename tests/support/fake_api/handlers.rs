//! HTTP: the API server's URL layout, query parameters and response shapes,
//! served as a tower `Service` that `kube::Client::new` accepts.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Bytes;
use serde_json::{Value, json};

use super::FakeApiServer;
use super::faults::RequestRecord;
use super::json::{hex_decode, hex_encode, url_decode};
use super::resources::{KINDS, ResId, by_path};
use super::selectors::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::ListQuery;
use super::watch::{self, Start, WatchSpec};
use super::writes::{Origin, Outcome, Reply, WriteCtx};

pub type ResBody = UnsyncBoxBody<Bytes, Infallible>;

/// The tower service handed to `kube::Client::new`.
#[derive(Clone)]
pub struct FakeService(pub FakeApiServer);

impl tower::Service<Request<kube::client::Body>> for FakeService {
    type Response = Response<ResBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<kube::client::Body>) -> Self::Future {
        let server = self.0.clone();
        let path = req.uri().path().to_owned();
        Box::pin(async move {
            if server.hangs(&path) {
                std::future::pending::<()>().await;
            }
            let writes = matches!(
                *req.method(),
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE
            );
            let _in_flight =
                (writes && path.contains("/endpoints")).then(|| server.endpoint_write_started());
            let latency = server.write_latency();
            if writes && !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            let (parts, body) = req.into_parts();
            let body = match body.collect_bytes().await {
                Ok(b) => b,
                Err(e) => return Ok(error(&ApiError::bad_request(e.to_string()))),
            };
            Ok(server.handle(&parts, &body))
        })
    }
}

/// The media type of Kubernetes' protobuf encoding.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn respond(code: u16, bytes: Vec<u8>) -> Response<ResBody> {
    respond_as(code, "application/json", bytes)
}

fn respond_as(code: u16, content_type: &str, bytes: Vec<u8>) -> Response<ResBody> {
    Response::builder()
        .status(StatusCode::from_u16(code).expect("valid status code"))
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(bytes)).boxed_unsync())
        .expect("valid response")
}

pub(super) fn error(e: &ApiError) -> Response<ResBody> {
    respond(e.code, serde_json::to_vec(&e.to_status()).expect("JSON"))
}

/// A parsed resource URL.
struct Route {
    res: ResId,
    namespace: String,
    name: Option<String>,
    sub: Option<String>,
}

fn route(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let owned = |s: Option<&&str>| s.map(|s| (*s).to_owned());
    let (plural, ns, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !["status", "finalize"].contains(plural) && tail.len() <= 2 =>
        {
            (
                *plural,
                (*ns).to_owned(),
                owned(tail.first()),
                owned(tail.get(1)),
            )
        }
        [plural, tail @ ..] if tail.len() <= 2 => (
            *plural,
            String::new(),
            owned(tail.first()),
            owned(tail.get(1)),
        ),
        _ => return None,
    };
    let res = by_path(group, version, plural)?;
    Some(Route {
        res,
        namespace: ns,
        name,
        sub,
    })
}

fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (url_decode(k), url_decode(v))
        })
        .collect()
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json parse error: {e}")))
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

impl FakeApiServer {
    pub(super) fn handle(&self, parts: &http::request::Parts, body: &[u8]) -> Response<ResBody> {
        let path = parts.uri.path();
        if let Some(resp) = self.discovery(path) {
            return resp;
        }
        let Some(r) = route(path) else {
            return error(&ApiError::unknown_path());
        };
        let q = parse_query(parts.uri.query());
        let watching = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
        let verb = match (&parts.method, &r.name) {
            (&Method::GET, Some(_)) => "get",
            (&Method::GET, None) if watching => "watch",
            (&Method::GET, None) => "list",
            (&Method::POST, None) => "create",
            (&Method::PUT, Some(_)) => "update",
            (&Method::PATCH, Some(_)) => "patch",
            (&Method::DELETE, Some(_)) => "delete",
            (m, _) => return error(&ApiError::method_not_allowed(m.as_str())),
        };
        let k = &KINDS[r.res];
        if !k.namespaced && !r.namespace.is_empty() {
            return error(&ApiError::unknown_path());
        }
        if k.namespaced && r.namespace.is_empty() && verb != "list" && verb != "watch" {
            return error(&ApiError::unknown_path());
        }
        let name = r.name.clone().unwrap_or_default();
        let status_sub = match r.sub.as_deref() {
            None => false,
            Some("status")
                if k.status_subresource && matches!(verb, "get" | "update" | "patch") =>
            {
                true
            }
            Some(_) => return error(&ApiError::unknown_path()),
        };
        // Served as protobuf to a client that asks (as client-go's controllers do).
        let plural = KINDS[r.res].plural;
        let protobuf = super::protobuf_objects::served_as_protobuf(plural)
            && parts
                .headers
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains(PROTOBUF));
        let mut state = self.shared.lock();
        let protobuf = protobuf && !state.faults.json_only;
        if protobuf && matches!(verb, "list" | "watch") {
            *state.faults.protobuf_answers.entry(plural).or_default() += 1;
        }
        let injected = state.faults.take(verb, r.res);
        let result = match injected {
            Some(code) => Err(ApiError::injected(code, r.res, &name)),
            None => {
                let ctx = WriteCtx {
                    origin: Origin::Http,
                    dry_run: q.get("dryRun").is_some_and(|v| v == "All"),
                };
                let content_type = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                match verb {
                    "get" => state
                        .get(r.res, &r.namespace, &name)
                        .map(|o| respond(200, o.typed_bytes(r.res)))
                        .ok_or_else(|| ApiError::not_found(r.res, &name)),
                    "list" => self.http_list(&state, &r, &q, protobuf),
                    "watch" => self.http_watch(&mut state, &r, &q, protobuf),
                    "create" => parse_json(body)
                        .and_then(|v| state.create(r.res, &r.namespace, v, ctx))
                        .map(|o| outcome(r.res, o)),
                    "update" => parse_json(body)
                        .and_then(|v| state.update(r.res, &r.namespace, &name, v, status_sub, ctx))
                        .map(|o| outcome(r.res, o)),
                    "patch" => {
                        let apply = content_type == "application/apply-patch+yaml";
                        if !apply
                            && content_type != "application/merge-patch+json"
                            && content_type != "application/strategic-merge-patch+json"
                        {
                            Err(ApiError::unsupported_media_type(&content_type))
                        } else {
                            let strategic =
                                content_type == "application/strategic-merge-patch+json";
                            parse_json(body)
                                .and_then(|p| {
                                    state.patch(
                                        r.res,
                                        &r.namespace,
                                        &name,
                                        &p,
                                        (apply, strategic),
                                        status_sub,
                                        ctx,
                                    )
                                })
                                .map(|o| outcome(r.res, o))
                        }
                    }
                    _ => {
                        let opts = if body.is_empty() {
                            Ok(Value::Null)
                        } else {
                            parse_json(body)
                        };
                        opts.and_then(|o| state.delete(r.res, &r.namespace, &name, &o, ctx))
                            .map(|o| outcome(r.res, o))
                    }
                }
            }
        };
        let resp = result.unwrap_or_else(|e| error(&e));
        state.faults.log.push(RequestRecord {
            verb,
            resource: k.qualified(),
            namespace: r.namespace.clone(),
            name,
            subresource: r.sub.clone().unwrap_or_default(),
            code: resp.status().as_u16(),
        });
        resp
    }

    fn http_list(
        &self,
        state: &super::store::State,
        r: &Route,
        q: &HashMap<String, String>,
        protobuf: bool,
    ) -> Result<Response<ResBody>, ApiError> {
        let k = &KINDS[r.res];
        let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
        let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str), k)?;
        let rv = q.get("resourceVersion").map_or("", String::as_str);
        let rvm = q.get("resourceVersionMatch").map_or("", String::as_str);
        let limit = match q.get("limit") {
            Some(l) => Some(
                l.parse::<usize>()
                    .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}")))?,
            ),
            None => None,
        };
        let token = q.get("continue").filter(|c| !c.is_empty());
        let (at_rv, after) = if let Some(token) = token {
            if !rv.is_empty() && rv != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            decode_continue(token)?
        } else {
            if !rvm.is_empty() && rv.is_empty() {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            let at = match (rv, rvm) {
                ("", _) | ("0", "" | "NotOlderThan") => state.rv,
                ("0", "Exact") => {
                    return Err(ApiError::bad_request(
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
                (n, "" | "NotOlderThan" | "Exact") => {
                    let n = parse_rv(n)?;
                    if n > state.rv {
                        return Err(ApiError::too_large_rv(n, state.rv));
                    }
                    if rvm == "Exact" { n } else { state.rv }
                }
                (_, other) => {
                    return Err(ApiError::bad_request(format!(
                        "unsupported resourceVersionMatch: {other}"
                    )));
                }
            };
            (at, None)
        };
        let query = ListQuery {
            namespace: Some(r.namespace.as_str()),
            labels: &labels,
            fields: &fields,
            limit,
            after: after.as_deref(),
            at_rv,
        };
        let page = state.list(r.res, &query).map_err(|_expired| {
            if token.is_some() {
                ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
            } else {
                ApiError::expired("The resourceVersion for the provided list is too old.")
            }
        })?;
        let mut meta = json!({"resourceVersion": at_rv.to_string()});
        if let Some(last) = &page.more_after {
            meta["continue"] = json!(encode_continue(at_rv, last));
        } else if r.namespace.is_empty() {
            // A whole list, its last page: the client has every change up to `at_rv`.
            let delivered = &state.tables[r.res].delivered;
            delivered.fetch_max(at_rv, std::sync::atomic::Ordering::Relaxed);
        }
        if protobuf {
            let items: Vec<Vec<u8>> = page
                .items
                .iter()
                .map(|item| super::protobuf_objects::message_of(k.plural, &item.json))
                .collect();
            let rv = meta["resourceVersion"].as_str().unwrap_or_default();
            let token = meta["continue"].as_str().unwrap_or_default();
            let list_kind = format!("{}List", k.kind);
            let bytes =
                super::protobuf_objects::list(&k.api_version(), &list_kind, &items, rv, token);
            return Ok(respond_as(200, PROTOBUF, bytes));
        }
        let head = json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version(), "metadata": meta});
        let mut out = serde_json::to_vec(&head).expect("JSON");
        out.pop();
        out.extend_from_slice(b",\"items\":[");
        for (i, item) in page.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&item.json);
        }
        out.extend_from_slice(b"]}");
        Ok(respond(200, out))
    }

    fn http_watch(
        &self,
        state: &mut super::store::State,
        r: &Route,
        q: &HashMap<String, String>,
        protobuf: bool,
    ) -> Result<Response<ResBody>, ApiError> {
        let k = &KINDS[r.res];
        let flag = |name: &str| matches!(q.get(name).map(String::as_str), Some("true" | "1"));
        let rv = q.get("resourceVersion").map_or("", String::as_str);
        let rvm = q.get("resourceVersionMatch").map_or("", String::as_str);
        let bookmarks = flag("allowWatchBookmarks");
        let start = if flag("sendInitialEvents") {
            if !bookmarks || rvm != "NotOlderThan" {
                return Err(ApiError::bad_request(
                    "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
                ));
            }
            if !rv.is_empty() && rv != "0" && parse_rv(rv)? > state.rv {
                return Err(ApiError::too_large_rv(parse_rv(rv)?, state.rv));
            }
            Start::State { end_bookmark: true }
        } else if !rvm.is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        } else if rv.is_empty() || rv == "0" {
            Start::State {
                end_bookmark: false,
            }
        } else {
            Start::After(parse_rv(rv)?)
        };
        let timeout = match q.get("timeoutSeconds") {
            Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid timeoutSeconds: {t}"))
            })?)),
            None => None,
        };
        let spec = WatchSpec {
            res: r.res,
            namespace: r.namespace.clone(),
            labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
            fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str), k)?,
            bookmarks,
            timeout,
            start,
            bookmark_every: self.bookmark_every,
            protobuf,
        };
        let stream = watch::start(&self.shared, state, spec)?;
        let content_type = if protobuf {
            "application/vnd.kubernetes.protobuf;stream=watch"
        } else {
            "application/json"
        };
        Ok(Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(StreamBody::new(stream).boxed_unsync())
            .expect("valid response"))
    }

    /// `/version` and the discovery documents, from the resource table.
    fn discovery(&self, path: &str) -> Option<Response<ResBody>> {
        let doc = match path.trim_end_matches('/') {
            "/version" => {
                json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-fake", "platform": "linux/amd64"})
            }
            "/api" => {
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            }
            "/apis" => {
                let mut groups: Vec<&str> = KINDS
                    .iter()
                    .map(|k| k.group)
                    .filter(|g| !g.is_empty())
                    .collect();
                groups.dedup();
                let groups: Vec<Value> = groups
                    .iter()
                    .map(|g| {
                        let gv = json!({"groupVersion": format!("{g}/v1"), "version": "v1"});
                        json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
                    })
                    .collect();
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
            }
            p => {
                let gv = p
                    .strip_prefix("/api/")
                    .or_else(|| p.strip_prefix("/apis/"))?;
                let resources: Vec<Value> = KINDS
                    .iter()
                    .filter(|k| k.api_version() == gv)
                    .map(|k| {
                        json!({"name": k.plural, "singularName": k.kind.to_lowercase(), "namespaced": k.namespaced, "kind": k.kind,
                            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
                    })
                    .collect();
                if resources.is_empty() {
                    return None;
                }
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
            }
        };
        Some(respond(200, serde_json::to_vec(&doc).expect("JSON")))
    }
}

fn outcome(res: ResId, o: Outcome) -> Response<ResBody> {
    match o.reply {
        Reply::Object(obj) => respond(o.code, obj.typed_bytes(res)),
        Reply::Json(v) => respond(o.code, serde_json::to_vec(&v).expect("JSON")),
    }
}

/// Opaque token: hex of `rv` and the last key, like etcd's start key.
fn encode_continue(rv: u64, last_key: &str) -> String {
    hex_encode(format!("{rv}\0{last_key}").as_bytes())
}

fn decode_continue(token: &str) -> Result<(u64, Option<String>), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = String::from_utf8(hex_decode(token).ok_or_else(bad)?).map_err(|_| bad())?;
    let (rv, key) = raw.split_once('\0').ok_or_else(bad)?;
    Ok((rv.parse().map_err(|_| bad())?, Some(key.to_owned())))
}
