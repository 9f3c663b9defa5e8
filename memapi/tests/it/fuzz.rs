//! Property tests of request decoding: label selectors against a reference
//! evaluation, and arbitrary requests (methods, paths, queries, bodies,
//! content types) that must all be answered, never with a 5xx or a panic.
//! `MEMAPI_CASES` sets the number of cases of each (default 1,000).

use crate::support::pv;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams};
use memapi::MemApi;
use proptest::prelude::*;
use std::collections::BTreeMap;
use tower::ServiceExt;

fn cases() -> u32 {
    std::env::var("MEMAPI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

const KEYS: [&str; 3] = ["a", "b", "example.com/c"];
const VALUES: [&str; 3] = ["x", "y", "z"];

/// One requirement of a label selector, as numbers.
#[derive(Debug, Clone)]
enum Term {
    Eq(usize, usize, bool),
    NotEq(usize, usize),
    In(usize, Vec<usize>),
    NotIn(usize, Vec<usize>),
    Exists(usize),
    NotExists(usize),
}

fn term() -> impl Strategy<Value = Term> {
    let key = 0..KEYS.len();
    let value = 0..VALUES.len();
    let values = prop::collection::vec(0..VALUES.len(), 1..3);
    prop_oneof![
        (key.clone(), value.clone(), any::<bool>()).prop_map(|(k, v, d)| Term::Eq(k, v, d)),
        (key.clone(), value).prop_map(|(k, v)| Term::NotEq(k, v)),
        (key.clone(), values.clone()).prop_map(|(k, v)| Term::In(k, v)),
        (key.clone(), values).prop_map(|(k, v)| Term::NotIn(k, v)),
        key.clone().prop_map(Term::Exists),
        key.prop_map(Term::NotExists),
    ]
}

fn render(term: &Term, space: &str) -> String {
    let set = |vs: &[usize]| {
        vs.iter()
            .map(|v| VALUES[*v])
            .collect::<Vec<_>>()
            .join(&format!(",{space}"))
    };
    match term {
        Term::Eq(k, v, double) => {
            let op = if *double { "==" } else { "=" };
            format!("{}{space}{op}{space}{}", KEYS[*k], VALUES[*v])
        }
        Term::NotEq(k, v) => format!("{}{space}!={space}{}", KEYS[*k], VALUES[*v]),
        Term::In(k, vs) => format!("{} in ({space}{})", KEYS[*k], set(vs)),
        Term::NotIn(k, vs) => format!("{} notin ({})", KEYS[*k], set(vs)),
        Term::Exists(k) => format!("{space}{}", KEYS[*k]),
        Term::NotExists(k) => format!("!{}", KEYS[*k]),
    }
}

fn holds(term: &Term, labels: &BTreeMap<String, String>) -> bool {
    let get = |k: usize| labels.get(KEYS[k]).map(String::as_str);
    match term {
        Term::Eq(k, v, _) => get(*k) == Some(VALUES[*v]),
        Term::NotEq(k, v) => get(*k) != Some(VALUES[*v]),
        Term::In(k, vs) => get(*k).is_some_and(|l| vs.iter().any(|v| VALUES[*v] == l)),
        Term::NotIn(k, vs) => get(*k).is_none_or(|l| vs.iter().all(|v| VALUES[*v] != l)),
        Term::Exists(k) => get(*k).is_some(),
        Term::NotExists(k) => get(*k).is_none(),
    }
}

/// Labels of one volume: each key absent or one of the values.
fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::vec(prop::option::of(0..VALUES.len()), KEYS.len()).prop_map(|choice| {
        choice
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| (KEYS[k].to_string(), VALUES[v].to_string())))
            .collect()
    })
}

/// What memapi answers to a raw request: its code, or that the service
/// itself failed.
async fn answer(mem: &MemApi, method: &str, uri: &str, ct: &str, body: Vec<u8>) -> Option<u16> {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(kube::client::Body::from(body))
        .ok()?;
    let resp = mem.service().oneshot(req).await.ok()?;
    let code = resp.status().as_u16();
    // Watches stream until their timeout; the head of the answer is enough.
    if !uri.contains("watch") {
        let _ = resp.into_body().collect().await;
    }
    Some(code)
}

const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
const SEGMENTS: [&str; 14] = [
    "api",
    "v1",
    "apis",
    "storage.k8s.io",
    "namespaces",
    "default",
    "persistentvolumes",
    "persistentvolumeclaims",
    "pods",
    "pv1",
    "status",
    "events",
    "%zz",
    "..",
];
const TYPES: [&str; 6] = [
    "application/json",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
];
const BODIES: [&[u8]; 6] = [
    b"",
    b"{",
    b"[]",
    br#"{"metadata":{"name":"pv1"},"spec":{"capacity":{"storage":"bogus"}}}"#,
    br#"[{"op":"replace","path":"/spec/x","value":1}]"#,
    br#"{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv1","resourceVersion":"abc"}}"#,
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn label_selectors_select_what_a_reference_selects(
        pools in prop::collection::vec(labels(), 0..6),
        terms in prop::collection::vec(term(), 0..4),
        spaced in any::<bool>(),
    ) {
        let space = if spaced { " " } else { "" };
        let selector = terms.iter().map(|t| render(t, space)).collect::<Vec<_>>().join(",");
        let mem = MemApi::new();
        let mut expected = Vec::new();
        for (i, labels) in pools.iter().enumerate() {
            let mut volume = pv(&format!("pv{i}"), "1Gi");
            volume.metadata.labels = Some(labels.clone());
            mem.create(&volume).unwrap();
            if terms.iter().all(|t| holds(t, labels)) {
                expected.push(format!("pv{i}"));
            }
        }
        let listed = block_on(async {
            let api: Api<PersistentVolume> = Api::all(mem.client());
            api.list(&ListParams::default().labels(&selector)).await
        });
        let names: Vec<String> = listed
            .map_err(|e| TestCaseError::fail(format!("{selector:?}: {e}")))?
            .items
            .iter()
            .map(kube::ResourceExt::name_any)
            .collect();
        prop_assert_eq!(names, expected, "selector {:?}", selector);
    }

    #[test]
    fn any_selector_string_is_answered_with_200_or_400(
        labels in "[a-z=!,() ]{0,20}|\\PC{0,12}",
        fields in "[a-z.=!, ]{0,20}",
    ) {
        let mem = MemApi::new();
        mem.create(&pv("pv1", "1Gi")).unwrap();
        let query = |s: &str| {
            s.bytes()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>()
        };
        let uri = format!(
            "/api/v1/persistentvolumes?labelSelector={}&fieldSelector={}",
            query(&labels),
            query(&fields)
        );
        let code = block_on(answer(&mem, "GET", &uri, "application/json", Vec::new()));
        prop_assert!(matches!(code, Some(200 | 400)), "{:?} for {}", code, uri);
    }

    #[test]
    fn any_request_is_answered_without_a_server_error(
        method in 0..METHODS.len(),
        path in prop::collection::vec(0..SEGMENTS.len(), 0..6),
        query in "[a-zA-Z=&%0-9]{0,16}",
        content_type in 0..TYPES.len(),
        body in 0..BODIES.len(),
        junk in prop::collection::vec(any::<u8>(), 0..24),
    ) {
        let mem = MemApi::new();
        mem.create(&pv("pv1", "1Gi")).unwrap();
        let path: Vec<&str> = path.iter().map(|s| SEGMENTS[*s]).collect();
        let uri = format!("/{}?{query}", path.join("/"));
        // A URI the HTTP layer refuses never reaches memapi.
        prop_assume!(uri.parse::<http::Uri>().is_ok());
        let body = if junk.len() % 3 == 0 { junk } else { BODIES[body].to_vec() };
        let code = block_on(answer(&mem, METHODS[method], &uri, TYPES[content_type], body));
        prop_assert!(code.is_some_and(|c| c < 500), "{:?} for {} {}", code, METHODS[method], uri);
    }
}
