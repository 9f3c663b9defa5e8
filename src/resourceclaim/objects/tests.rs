use super::*;

#[test]
fn a_short_generate_name_is_pod_claim_and_a_hyphen() {
    assert_eq!(
        generate_name("my-pod", "resource-1a"),
        "my-pod-resource-1a-"
    );
}

#[test]
fn a_long_generate_name_cuts_both_names_and_keeps_the_hyphens() {
    let pod = "p".repeat(60);
    let claim = "c".repeat(40);
    let name = generate_name(&pod, &claim);
    assert!(name.len() <= MAX_GENERATE_NAME, "{name}");
    assert!(name.ends_with("c-"), "{name}");
    let (pod_part, rest) = name.split_once('-').unwrap();
    assert_eq!(pod_part.len(), 60 * 55 / 100);
    assert_eq!(rest.len(), 55 - pod_part.len() + 1);
}

#[test]
fn generate_name_at_the_limit_is_kept_whole() {
    let pod = "p".repeat(30);
    let claim = "c".repeat(25);
    assert_eq!(generate_name(&pod, &claim).len(), 57);
    assert_eq!(generate_name(&pod, &claim), format!("{pod}-{claim}-"));
}
