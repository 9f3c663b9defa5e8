//! Kubernetes' protobuf wire form, for the ceiling probe's protobuf
//! writers and watches: an object is the magic `k8s\0` followed by a
//! `runtime.Unknown` whose `raw` holds the object's own message (k8s-pb's
//! generated types); a watch stream is a sequence of such envelopes, each
//! after its length as four big-endian bytes.

use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use kube::Client;
use prost::Message;

/// The media type of Kubernetes' protobuf.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What precedes every protobuf object on the wire.
const MAGIC: &[u8; 4] = b"k8s\0";

/// `message` as the wire carries it, typed `api_version`/`kind`.
pub(crate) fn encode<M: Message>(api_version: &str, kind: &str, message: &M) -> Vec<u8> {
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut bytes = MAGIC.to_vec();
    envelope.encode(&mut bytes).expect("a Vec grows");
    bytes
}

/// The message a wire envelope carries.
pub(crate) fn decode<M: Message + Default>(bytes: &[u8]) -> M {
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .unwrap_or_else(|| panic!("not protobuf: {}", String::from_utf8_lossy(bytes)));
    let envelope = Unknown::decode(body).expect("a runtime.Unknown");
    M::decode(envelope.raw.unwrap_or_default().as_slice()).expect("the object's message")
}

/// Sends `method path` with `body` (protobuf, when given) asking for
/// protobuf, and decodes the answer; panics on any status but 2xx.
pub(crate) async fn request<M: Message + Default>(
    client: &Client,
    method: http::Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> M {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, PROTOBUF);
    if body.is_some() {
        request = request.header(http::header::CONTENT_TYPE, PROTOBUF);
    }
    let request = request
        .body(kube::client::Body::from(body.unwrap_or_default()))
        .expect("a request");
    let answer = client.send(request).await.expect("an answer");
    let status = answer.status();
    let bytes = answer
        .into_body()
        .collect()
        .await
        .expect("the answer's body")
        .to_bytes();
    assert!(
        status.is_success(),
        "{path}: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    decode(&bytes)
}

/// PUTs `body` (a protobuf object) to `path`; the object as the server
/// answered.
pub(crate) async fn put<M: Message + Default>(client: &Client, path: &str, body: Vec<u8>) -> M {
    request(client, http::Method::PUT, path, Some(body)).await
}

/// Watches `path` (a collection) in protobuf from now on, reading every
/// frame and dropping it, as a watcher in protobuf makes the server encode
/// its events; watches again when the server ends the stream.
pub(crate) async fn drain_watch(client: Client, path: String) {
    loop {
        let request = http::Request::builder()
            .uri(format!("{path}?watch=true&allowWatchBookmarks=true"))
            .header(http::header::ACCEPT, format!("{PROTOBUF};stream=watch"))
            .body(kube::client::Body::empty())
            .expect("a request");
        let Ok(answer) = client.send(request).await else {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        };
        let mut frames = answer.into_body().into_data_stream();
        while let Some(Ok(_)) = frames.next().await {}
    }
}
