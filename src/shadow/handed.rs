//! What the executors hand shadow mode instead of sending it: each write a
//! plan would send becomes the decisions it carries, each operation a plan
//! would start the decision of its first sign, and each reservation is
//! kept until the cluster shows what became of its claim.

use std::any::Any;

use super::Comparison;
use super::decisions::{of_start, of_write};
use super::verdict::Verdict;
use super::views::View;
use crate::runtime::operations::OperationName;
use crate::runtime::plan::{Reservation, Verb};
use crate::runtime::shadow::{Intended, Shadow};

impl Shadow for Comparison {
    fn write(&self, intended: &Intended<'_>) {
        fn view<'a>(object: Option<&'a (dyn Any + Send + Sync)>) -> Option<View<'a>> {
            object.and_then(View::of_any)
        }
        let deleted = intended.verb == Verb::Delete;
        let before = view(intended.before)
            .or_else(|| deleted.then(|| View::named(intended.key, intended.uid)));
        let shown = view(intended.shown);
        let decisions = of_write(
            intended.resource,
            intended.verb,
            before.as_ref(),
            view(intended.after).as_ref(),
        );
        self.expect(intended.controller, decisions);
        if shown.is_some() || deleted {
            self.present(intended.resource, intended.key, shown.as_ref());
        }
    }

    fn start(&self, controller: &'static str, operation: &OperationName) {
        let Some(foreseen) = self
            .judge
            .get()
            .and_then(|judge| (judge.foresee)(operation.kind(), operation.object()))
        else {
            return;
        };
        let decisions = of_start(operation, foreseen.sign);
        let mut state = self.lock();
        let started = (operation.object().clone(), foreseen.version);
        let before = state.started.insert(operation.to_string(), started.clone());
        match before {
            // Started again on the same version: the same decision.
            Some(before) if before == started => {}
            // On a newer one, with its first sign shown already: the
            // operation started before goes on.
            Some(_) if foreseen.shown => {}
            // The cluster came to it first.
            None if foreseen.shown => {
                for decision in decisions {
                    self.count(
                        &mut state,
                        controller,
                        decision.kind,
                        &decision.subject,
                        &decision.ours,
                        Verdict::Agree,
                    );
                }
            }
            _ => {
                drop(state);
                self.expect(controller, decisions);
            }
        }
    }

    fn reserve(&self, reservation: Reservation, kept: Box<dyn Any + Send>) {
        self.keep(&reservation.for_uid, &reservation.reserved, kept);
    }
}
