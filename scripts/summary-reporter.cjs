// Mocha's spec output, closed by the plain "N passed, N failed" line that CI reads.
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const { passes, failures, pending } = runner.stats;
      console.log(`${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}`);
    });
  }
}

module.exports = SpecWithSummary;
