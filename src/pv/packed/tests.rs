use testkit::{claim, volume};

use super::*;

#[test]
fn objects_read_back_as_they_were_packed() {
    let v = volume("v", "5Gi")
        .bound_to("uid", "c")
        .phase("Bound")
        .labels(&[("tier", "gold")])
        .annotation("a", "b")
        .rv("7")
        .build();
    let stored = Stored::new(&v, true).expect("packed");
    assert_eq!(stored.object().as_deref(), Some(&v));
    assert_eq!(stored.version(), Some(&Version::Number(7)));
    assert!(stored.listed());

    let c = claim("c", "uid", "5Gi")
        .volume_name("v")
        .selector(&[("tier", "gold")])
        .build();
    let mut stored = Stored::new(&c, false).expect("packed");
    assert_eq!(stored.object().as_deref(), Some(&c));
    assert!(!stored.listed());
    stored.set_listed();
    assert!(stored.listed());
}

#[test]
fn objects_pack_to_a_fraction_of_their_text() {
    let v = volume("pvc-4f1c2d9e-1c2d-4e5f-8a9b-0123456789ab", "5Gi")
        .bound_to("9a8b7c6d-1c2d-4e5f-8a9b-ba9876543210", "data-0")
        .phase("Bound")
        .class("standard")
        .annotation("pv.kubernetes.io/bound-by-controller", "yes")
        .rv("123456")
        .build();
    let text = serde_json::to_vec(&v).expect("text").len();
    let packed = Packed::pack(&v).expect("packed");
    assert!(
        packed.compressed.len() * 3 < text,
        "{} bytes packed from {text}",
        packed.compressed.len()
    );
    assert_eq!(packed.unpack().expect("unpacked").as_ref(), &v);
}

#[test]
fn versions_keep_their_text() {
    for text in ["0", "7", "18446744073709551615"] {
        assert!(matches!(Version::new(text), Version::Number(_)), "{text}");
        assert!(Version::new(text).is(text));
        assert_eq!(Version::new(text).to_string(), text);
    }
    for text in ["", "07", "+7", "-7", "18446744073709551616", "abc"] {
        assert_eq!(Version::new(text), Version::Text(text.into()));
        assert!(Version::new(text).is(text));
        assert_eq!(Version::new(text).to_string(), text);
    }
    assert!(!Version::new("7").is("07"));
    assert!(!Version::new("07").is("7"));
}
