//! Metrics against hand-computed and scikit-learn reference values.

use hdgcn::Error;
use hdgcn::metrics::{accuracy, confusion_matrix, f1_macro, f1_micro};
use ndarray::array;

// Reference values computed once with scikit-learn 1.9.1:
//   from sklearn.metrics import f1_score, accuracy_score, confusion_matrix
//   t = [0,1,2,2,1,0,3,3,3,1]; p = [0,2,2,1,1,0,3,0,3,4]
//   accuracy_score(t, p)                               -> 0.6
//   f1_score(t, p, average='micro')                    -> 0.6
//   f1_score(t, p, average='macro', zero_division=0)   -> 0.5
//   confusion_matrix(t, p, labels=range(6))            -> see below
//   t2 = [0,0,1,1,2]; p2 = [0,0,0,0,0]
//   f1_score(t2, p2, average='macro', zero_division=0) -> 0.19047619047619047
const T: [usize; 10] = [0, 1, 2, 2, 1, 0, 3, 3, 3, 1];
const P: [usize; 10] = [0, 2, 2, 1, 1, 0, 3, 0, 3, 4];

#[test]
fn accuracy_values() {
    assert_eq!(accuracy(&P, &T).unwrap(), 0.6);
    assert_eq!(accuracy(&[1, 1], &[1, 1]).unwrap(), 1.0);
    assert_eq!(accuracy(&[0, 1, 2], &[1, 2, 0]).unwrap(), 0.0);
}

#[test]
fn confusion_matrix_rows_are_true_class() {
    let m = confusion_matrix(&P, &T, 6).unwrap();
    let expected = array![
        [2, 0, 0, 0, 0, 0],
        [0, 1, 1, 0, 1, 0],
        [0, 1, 1, 0, 0, 0],
        [1, 0, 0, 2, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ];
    assert_eq!(m, expected);
    assert_eq!(m.sum(), 10);
    // Rows are the true class: true 0 predicted 1 lands in [0, 1].
    let m = confusion_matrix(&[1], &[0], 2).unwrap();
    assert_eq!(m, array![[0, 1], [0, 0]]);
}

#[test]
fn f1_values() {
    assert!((f1_micro(&P, &T, 5).unwrap() - 0.6).abs() < 1e-12);
    // Hand: per-class F1 = 0.8, 0.4, 0.5, 0.8, 0 (class 4 only predicted);
    // class 5 is absent from both and is not averaged (sklearn semantics).
    assert!((f1_macro(&P, &T, 6).unwrap() - 0.5).abs() < 1e-12);
    assert!((f1_macro(&P, &T, 5).unwrap() - 0.5).abs() < 1e-12);
    let f = f1_macro(&[0, 0, 0, 0, 0], &[0, 0, 1, 1, 2], 3).unwrap();
    assert!((f - 0.190_476_190_476_190_47).abs() < 1e-12, "{f}");
    assert_eq!(f1_macro(&[2, 2], &[2, 2], 3).unwrap(), 1.0);
}

#[test]
fn errors() {
    let e = accuracy(&[0, 1], &[0]).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
    let e = accuracy(&[], &[]).unwrap_err();
    assert!(matches!(e, Error::Empty(_)), "{e:?}");
    let e = confusion_matrix(&[0, 3], &[0, 1], 3).unwrap_err();
    assert!(
        matches!(
            e,
            Error::IndexOutOfRange {
                index: 3,
                len: 3,
                ..
            }
        ),
        "{e:?}"
    );
    let e = f1_macro(&[0, 1], &[0, 7], 3).unwrap_err();
    assert!(
        matches!(e, Error::IndexOutOfRange { index: 7, .. }),
        "{e:?}"
    );
    let e = f1_micro(&[], &[], 3).unwrap_err();
    assert!(matches!(e, Error::Empty(_)), "{e:?}");
    let e = f1_macro(&[0], &[0, 0], 3).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e:?}");
}

#[test]
fn huge_num_classes_does_not_allocate() {
    // f1 scores are linear in the classes present, not in num_classes.
    assert!((f1_macro(&P, &T, usize::MAX).unwrap() - 0.5).abs() < 1e-12);
    assert!((f1_micro(&P, &T, usize::MAX).unwrap() - 0.6).abs() < 1e-12);
    let e = confusion_matrix(&P, &T, usize::MAX).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    // Nor in the largest class id: one far-out class among two.
    let far = 1usize << 40;
    let f1 = f1_macro(&[0, far], &[0, 0], far + 1).unwrap();
    assert!((f1 - (2.0 / 3.0 + 0.0) / 2.0).abs() < 1e-12, "{f1}");
    // A size that fits in usize but not in memory is an error, not an abort.
    for n in [1usize << 31, 1 << 24] {
        let e = confusion_matrix(&[0], &[0], n).unwrap_err();
        assert!(e.to_string().contains("too many"), "{n}: {e}");
    }
}

#[test]
fn classification_report_matches_a_hand_computed_confusion_matrix() {
    use hdgcn::metrics::{ClassificationReport, f1_per_class};
    // Rows = true, columns = predicted:
    //        n  u  p
    //   n [  3  1  1 ]   support 5, predicted 4
    //   u [  1  0  1 ]   support 2, predicted 2
    //   p [  0  1  4 ]   support 5, predicted 6
    let mut target = Vec::new();
    let mut pred = Vec::new();
    for (t, row) in [[3, 1, 1], [1, 0, 1], [0, 1, 4]].iter().enumerate() {
        for (p, &k) in row.iter().enumerate() {
            for _ in 0..k {
                target.push(t);
                pred.push(p);
            }
        }
    }
    let r = ClassificationReport::new(&pred, &target, 3).unwrap();
    assert_eq!(
        r.confusion,
        ndarray::array![[3, 1, 1], [1, 0, 1], [0, 1, 4]]
    );
    assert!((r.accuracy - 7.0 / 12.0).abs() < 1e-12);
    // F1 = 2 tp / (support + predicted): 6/9, 0/4, 8/11.
    let f1 = [6.0 / 9.0, 0.0, 8.0 / 11.0];
    let precision = [3.0 / 4.0, 0.0, 4.0 / 6.0];
    let recall = [3.0 / 5.0, 0.0, 4.0 / 5.0];
    for c in 0..3 {
        assert!((r.per_class[c].f1 - f1[c]).abs() < 1e-12, "{c}");
        assert!(
            (r.per_class[c].precision - precision[c]).abs() < 1e-12,
            "{c}"
        );
        assert!((r.per_class[c].recall - recall[c]).abs() < 1e-12, "{c}");
    }
    assert_eq!(
        r.per_class.iter().map(|c| c.support).collect::<Vec<_>>(),
        [5, 2, 5]
    );
    let macro_f1 = (6.0 / 9.0 + 8.0 / 11.0) / 3.0;
    assert!((r.macro_f1 - macro_f1).abs() < 1e-12);
    assert!((hdgcn::metrics::f1_macro(&pred, &target, 3).unwrap() - macro_f1).abs() < 1e-12);
    assert_eq!(f1_per_class(&pred, &target, 3).unwrap().len(), 3);
    // A class that never occurs scores 0 and is left out of the macro mean.
    let r = ClassificationReport::new(&[0, 2], &[0, 2], 3).unwrap();
    assert_eq!(r.per_class[1].f1, 0.0);
    assert_eq!((r.accuracy, r.macro_f1), (1.0, 1.0));
    assert!(ClassificationReport::new(&[0, 3], &[0, 1], 3).is_err());
}
