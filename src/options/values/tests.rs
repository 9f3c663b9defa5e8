use super::*;

#[test]
fn counts_and_rates_refuse_what_cannot_work() {
    assert_eq!(at_least_one::<usize>("4"), Ok(4));
    assert_eq!(
        at_least_one::<usize>("0"),
        Err("must be 1 or more".to_string())
    );
    assert!(at_least_one::<u32>("-1").is_err());
    assert_eq!(non_negative_rate("0"), Ok(0.0));
    assert_eq!(non_negative_rate("20.5"), Ok(20.5));
    for bad in ["-1", "NaN", "inf", "x"] {
        assert!(non_negative_rate(bad).is_err(), "{bad}");
    }
    assert!(not_empty(" ").is_err());
    assert_eq!(not_empty("lease"), Ok("lease".to_string()));
}
