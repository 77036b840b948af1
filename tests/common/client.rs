//! A small 2026-07-28 client over hyper. Every request carries what the revision requires:
//! `params._meta` with the protocol version and client capabilities, and the mirrored
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers. A test can then break exactly one
//! of those things ([`Call::header`], [`Call::without_header`], [`Call::without_meta`]) to see the
//! gateway refuse it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use mrtr_gateway::protocol::{headers, meta, methods, MODERN_VERSION};
use serde_json::{json, Map, Value};

use super::{bounded, Reply, TestResult};

type Http = HyperClient<HttpConnector, Full<Bytes>>;

/// A client of one gateway endpoint.
#[derive(Clone)]
pub(crate) struct Client {
    http: Http,
    url: String,
    bearer: Option<String>,
    next_id: std::sync::Arc<AtomicI64>,
}

/// One request being built; [`Call::send`] sends it.
pub(crate) struct Call<'a> {
    client: &'a Client,
    method: String,
    name: Option<String>,
    id: Option<Value>,
    params: Map<String, Value>,
    meta: Map<String, Value>,
    headers: Vec<(HeaderName, Option<String>)>,
}

// === impl Client ===

impl Client {
    /// A client of the MCP endpoint at `url`.
    pub(crate) fn new(url: String) -> Self {
        let http = HyperClient::builder(TokioExecutor::new()).build_http();
        Self { http, url, bearer: None, next_id: std::sync::Arc::new(AtomicI64::new(1)) }
    }

    /// A client that keeps no idle connection: each request opens its own and closes it after
    /// the response, so a test can tell a connection the gateway leaked from one kept alive.
    pub(crate) fn unpooled(url: String) -> Self {
        let http = HyperClient::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build_http();
        Self { http, url, bearer: None, next_id: std::sync::Arc::new(AtomicI64::new(1)) }
    }

    /// The same client, sending `Authorization: Bearer <token>`.
    pub(crate) fn with_bearer(&self, token: &str) -> Self {
        Self { bearer: Some(token.to_owned()), ..self.clone() }
    }

    /// `tools/call name(arguments)`.
    pub(crate) fn call_tool(&self, name: &str, arguments: Value) -> Call<'_> {
        self.request(methods::TOOLS_CALL).named("name", name).param("arguments", arguments)
    }

    /// `prompts/get name(arguments)`.
    pub(crate) fn get_prompt(&self, name: &str, arguments: Value) -> Call<'_> {
        self.request(methods::PROMPTS_GET).named("name", name).param("arguments", arguments)
    }

    /// `resources/read uri`.
    pub(crate) fn read_resource(&self, uri: &str) -> Call<'_> {
        self.request(methods::RESOURCES_READ).named("uri", uri)
    }

    /// Any method, with no params besides `_meta`.
    pub(crate) fn request(&self, method: &str) -> Call<'_> {
        let mut meta = Map::new();
        meta.insert(meta::PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
        meta.insert(meta::CLIENT_CAPABILITIES.into(), json!({}));
        Call {
            client: self,
            method: method.to_owned(),
            name: None,
            id: None,
            params: Map::new(),
            meta,
            headers: Vec::new(),
        }
    }

    /// Sends a prepared HTTP request and reads the whole reply.
    pub(crate) async fn send_raw(&self, request: Request<Full<Bytes>>) -> TestResult<Reply> {
        bounded("a gateway reply", async {
            let response = self.http.request(request).await?;
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await?.to_bytes();
            Reply::parse(parts.status, &parts.headers, &bytes)
        })
        .await?
    }

    /// A request with an empty body and `method` to the endpoint (GET, DELETE...).
    pub(crate) async fn bare(&self, method: Method) -> TestResult<Reply> {
        let request = Request::builder().method(method).uri(&self.url).body(Full::new(Bytes::new()))?;
        self.send_raw(request).await
    }

    /// A POST of `body` exactly as given, with the usual headers for `method`.
    pub(crate) async fn post_bytes(&self, method: &str, body: Vec<u8>) -> TestResult<Reply> {
        let request = self.post(method, None, &[])?.body(Full::new(Bytes::from(body)))?;
        self.send_raw(request).await
    }

    fn post(
        &self,
        method: &str,
        name: Option<&str>,
        overrides: &[(HeaderName, Option<String>)],
    ) -> TestResult<http::request::Builder> {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        let mut set: Vec<(HeaderName, Option<String>)> = vec![
            (headers::PROTOCOL_VERSION, Some(MODERN_VERSION.to_owned())),
            (headers::METHOD, Some(method.to_owned())),
            (headers::NAME, name.map(str::to_owned)),
        ];
        if let Some(token) = &self.bearer {
            set.push((AUTHORIZATION, Some(format!("Bearer {token}"))));
        }
        set.extend(overrides.iter().cloned());
        for (header, value) in merged(set) {
            builder = builder.header(header, HeaderValue::from_str(&value).map_err(http::Error::from)?);
        }
        Ok(builder)
    }
}

/// Later entries win; `None` removes the header.
fn merged(set: Vec<(HeaderName, Option<String>)>) -> Vec<(HeaderName, String)> {
    let mut out: Vec<(HeaderName, Option<String>)> = Vec::new();
    for (name, value) in set {
        out.retain(|(n, _)| *n != name);
        out.push((name, value));
    }
    out.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))).collect()
}

// === impl Call ===

impl Call<'_> {
    /// `params._meta["io.modelcontextprotocol/clientCapabilities"]`.
    pub(crate) fn caps(self, caps: Value) -> Self {
        self.meta(meta::CLIENT_CAPABILITIES, caps)
    }

    /// `params.requestState`, echoed from an `input_required` result.
    pub(crate) fn state(self, state: &str) -> Self {
        self.param("requestState", json!(state))
    }

    /// `params.inputResponses`.
    pub(crate) fn responses(self, responses: Value) -> Self {
        self.param("inputResponses", responses)
    }

    /// `params._meta.progressToken`.
    pub(crate) fn progress(self, token: Value) -> Self {
        self.meta(meta::PROGRESS_TOKEN, token)
    }

    /// The JSON-RPC id (by default the next number of this client).
    pub(crate) fn id(mut self, id: Value) -> Self {
        self.id = Some(id);
        self
    }

    /// Any `params` field.
    pub(crate) fn param(mut self, key: &str, value: Value) -> Self {
        self.params.insert(key.to_owned(), value);
        self
    }

    /// Any `_meta` field.
    pub(crate) fn meta(mut self, key: &str, value: Value) -> Self {
        self.meta.insert(key.to_owned(), value);
        self
    }

    /// Leaves a `_meta` field out.
    pub(crate) fn without_meta(mut self, key: &str) -> Self {
        self.meta.remove(key);
        self
    }

    /// Sets a header to `value`, replacing what the client would send.
    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((HeaderName::from_static(name), Some(value.to_owned())));
        self
    }

    /// Leaves a header out.
    pub(crate) fn without_header(mut self, name: &'static str) -> Self {
        self.headers.push((HeaderName::from_static(name), None));
        self
    }

    /// Sends the request and reads the whole reply.
    pub(crate) async fn send(self) -> TestResult<Reply> {
        let body = serde_json::to_vec(&self.body())?;
        let request = self
            .client
            .post(&self.method, self.name.as_deref(), &self.headers)?
            .body(Full::new(Bytes::from(body)))?;
        self.client.send_raw(request).await
    }

    /// Sends the request and returns the response head and its unread body, for a test that
    /// reads a stream part way and then walks away.
    pub(crate) async fn open(self) -> TestResult<http::Response<hyper::body::Incoming>> {
        let body = serde_json::to_vec(&self.body())?;
        let request = self
            .client
            .post(&self.method, self.name.as_deref(), &self.headers)?
            .body(Full::new(Bytes::from(body)))?;
        Ok(bounded("a gateway response head", self.client.http.request(request)).await??)
    }

    /// The request as HTTP/1.1 bytes, for a test that writes it over a raw socket (slowly, in
    /// part, or not at all).
    pub(crate) fn http1_bytes(self) -> TestResult<Vec<u8>> {
        let body = serde_json::to_vec(&self.body())?;
        let request = self.client.post(&self.method, self.name.as_deref(), &self.headers)?.body(())?;
        let host = request.uri().authority().map(|a| a.to_string()).unwrap_or_default();
        let mut head = format!("POST {} HTTP/1.1\r\nhost: {host}\r\n", request.uri().path());
        for (name, value) in request.headers() {
            head.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap_or_default()));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&body);
        Ok(bytes)
    }

    /// The JSON-RPC request this call sends.
    pub(crate) fn body(&self) -> Value {
        let id =
            self.id.clone().unwrap_or_else(|| json!(self.client.next_id.fetch_add(1, Ordering::Relaxed)));
        let mut params = self.params.clone();
        params.insert("_meta".into(), Value::Object(self.meta.clone()));
        json!({"jsonrpc": "2.0", "id": id, "method": self.method, "params": params})
    }

    fn named(mut self, field: &str, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self.param(field, json!(name))
    }
}

/// `GET http://addr/path` on the admin listener: the status and the body text.
pub(crate) async fn admin_get(
    client: &Client,
    addr: SocketAddr,
    path: &str,
) -> TestResult<(StatusCode, String)> {
    let uri = format!("http://{addr}{path}");
    let request = Request::builder().uri(uri).body(Full::new(Bytes::new()))?;
    let reply = client.send_raw(request).await?;
    let text = match reply.body {
        Value::String(text) => text,
        other => other.to_string(),
    };
    Ok((reply.status, text))
}
