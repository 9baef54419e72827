// Answers every line "name|expression" of cases.txt as Node does, as "name|JSON of the value"
// (a promise is awaited), into node22.txt, which globals_test.go compares the sandbox with:
//   internal/e2e/medplum/node_modules/node-22/bin/node botrunner/testdata/globals/gen.js \
//     botrunner/testdata/globals/cases.txt > botrunner/testdata/globals/node22.txt
const fs = require('fs');
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
(async () => {
  for (const l of lines) {
    const [name, expr] = l.split(/\|(.*)/s);
    let v;
    try {
      v = await eval(expr);
    } catch (e) {
      v = 'THROW ' + e;
    }
    console.log(name + '|' + JSON.stringify(v));
  }
})();
