"""tfring-migrate, rule by rule, on small scripts (fast: only the TF1 name table test imports
TensorFlow)."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import REPO_ROOT, job_env
from tfring._migrate import cli, python_source, rules, text_rules


def migrate(source):
    new, notes = python_source.rewrite(textwrap.dedent(source))
    return new, notes


def manual(notes):
    return [n for n in notes if n.manual]


def test_horovod_imports_and_dotted_uses_become_tfring():
    new, notes = migrate("""\
        import horovod.tensorflow.keras as hvd
        import horovod.tensorflow
        from horovod.tensorflow.keras import callbacks
        from horovod.tensorflow import keras as khvd
        from horovod import tensorflow
        from horovod.tensorflow.compression import Compression
        horovod.tensorflow.allreduce(x)
        horovod.tensorflow.keras.callbacks.MetricAverageCallback()
        """)
    assert new == textwrap.dedent("""\
        import tfring.keras as hvd
        import tfring.tensorflow
        from tfring.keras import callbacks
        from tfring import keras as khvd
        from tfring import tensorflow
        from tfring.tensorflow.compression import Compression
        tfring.tensorflow.allreduce(x)
        tfring.keras.callbacks.MetricAverageCallback()
        """)
    assert not manual(notes)
    assert [n.line for n in notes] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_from_import_of_a_module_keeps_the_name_the_script_uses():
    new, _ = migrate("from horovod.tensorflow import keras\nkeras.init()\n")
    assert new == "from tfring import keras\nkeras.init()\n"


def test_unsupported_horovod_modules_are_left_with_the_reason():
    source = "import horovod.torch as hvd\nimport horovod.spark.keras\n"
    new, notes = migrate(source)
    assert new == source
    assert [(n.line, n.rewritten) for n in notes] == [(1, False), (2, False)]
    assert "torch.distributed" in notes[0].message and "tfring.spark.run(train_fn" in notes[1].message


def test_horovod_elastic_modules_become_tfring_elastic():
    new, _ = migrate("import horovod.tensorflow.keras as hvd\nfrom horovod.tensorflow.elastic import run\n"
                     "import horovod.keras.elastic\n")
    assert new == ("import tfring.keras as hvd\nfrom tfring.tensorflow.elastic import run\n"
                   "import tfring.keras.elastic\n")


def test_keras2_optimizer_lr_is_renamed_and_decay_is_explained():
    new, notes = migrate("""\
        import tensorflow as tf
        from tensorflow import keras
        a = keras.optimizers.Adadelta(lr=1.0, rho=0.9)
        b = tf.optimizers.Adam(lr=0.1, decay=1e-4)
        c = SGD(0.1, lr=2)
        d = something_else(lr=3)
        """)
    assert "Adadelta(learning_rate=1.0, rho=0.9)" in new
    assert "tf.optimizers.Adam(learning_rate=0.1, decay=1e-4)" in new  # decay left: no same-name fix
    assert "SGD(0.1, learning_rate=2)" in new and "something_else(lr=3)" in new
    (decay,) = manual(notes)
    assert decay.line == 4 and "InverseTimeDecay" in decay.message


def test_keras2_model_methods_and_arguments():
    new, notes = migrate("""\
        model.compile(loss="mse", optimizer=opt,
                      experimental_run_tf_function=False)
        model.compile(experimental_run_tf_function=False, loss="mse")
        model.fit_generator(gen, steps_per_epoch=4, workers=4, use_multiprocessing=True, max_queue_size=8)
        model.evaluate_generator(gen, steps=2)
        metric.reset_states()
        rnn.reset_states(states)
        hvd.broadcast_variables(opt.variables(), root_rank=0)
        print(model.optimizer.lr)
        """)
    assert new == textwrap.dedent("""\
        model.compile(loss="mse", optimizer=opt)
        model.compile(loss="mse")
        model.fit(gen, steps_per_epoch=4)
        model.evaluate(gen, steps=2)
        metric.reset_state()
        rnn.reset_states(states)
        hvd.broadcast_variables(opt.variables, root_rank=0)
        print(model.optimizer.learning_rate)
        """)
    assert not manual(notes)
    assert {n.line for n in notes} == {1, 3, 4, 5, 6, 8, 9}


def test_multi_worker_strategy_becomes_ring_strategy_with_its_import():
    new, notes = migrate("""\
        '''Doc.'''
        import os
        import tensorflow as tf

        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)
        """)
    assert new == textwrap.dedent("""\
        '''Doc.'''
        import os
        import tensorflow as tf
        import tfring

        strategy = tfring.RingStrategy()
        """)
    assert "arguments dropped" in notes[0].message and notes[0].rewritten
    new, _ = migrate("import tfring.keras\nimport tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n")
    assert new.count("import tfring") == 1, "import tfring.keras already binds tfring"


def test_removed_tf1_and_keras2_api_gets_the_manual_fix_through_the_scripts_aliases():
    source = textwrap.dedent("""\
        import tensorflow as tf
        from tensorflow.keras import backend as K
        from tensorflow.keras.preprocessing.image import ImageDataGenerator
        import horovod.tensorflow as hvd
        config = tf.ConfigProto()
        K.set_session(tf.Session(config=config))
        est = tf.estimator.Estimator(model_fn)
        gen = ImageDataGenerator(rotation_range=8)
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]  # tfring has it (TF1 graph mode)
        opt = hvd.DistributedOptimizer(opt, num_groups=2)
        """)
    new, notes = python_source.rewrite(source)
    left = {(n.line, n.message.split(":")[0]) for n in manual(notes)}
    assert left == {  # named as the script spells them
        (5, "tf.ConfigProto"), (6, "tf.Session"), (6, "K.set_session"), (7, "tf.estimator"),
        (10, "DistributedOptimizer(num_groups=...)"),
    }, "tf.keras.preprocessing.image.ImageDataGenerator still exists in Keras 3: no note"
    assert new.replace("import tfring.tensorflow as hvd", "import horovod.tensorflow as hvd") == source


def test_strings_get_launcher_and_variable_rewrites_and_comments_stay_as_written():
    source = textwrap.dedent('''\
        """Run: horovodrun -np 4 -H a:2,b:2 python train.py"""
        import os
        os.environ["HOROVOD_FUSION_THRESHOLD"] = "1"  # or horovodrun --fusion-threshold-mb 1
        os.environ["HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] = "0.8"
        print(f"HOROVOD_CYCLE_TIME={x}")
        # this is running via horovodrun; HOROVOD_CYCLE_TIME=2 HOROVOD_AUTOTUNE=1
        ''')
    new, notes = python_source.rewrite(source)
    assert new == textwrap.dedent('''\
        """Run: tfringrun -np 4 -H a:2,b:2 python train.py"""
        import os
        os.environ["TFRING_FUSION_THRESHOLD"] = "1"  # or horovodrun --fusion-threshold-mb 1
        os.environ["HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"] = "0.8"
        print(f"TFRING_CYCLE_TIME_MS={x}")
        # this is running via horovodrun; HOROVOD_CYCLE_TIME=2 HOROVOD_AUTOTUNE=1
        ''')
    (autotune,) = manual(notes)
    assert autotune.line == 4 and "autotuner" in autotune.message
    assert sorted(n.line for n in notes) == [1, 3, 4, 5], "a comment is neither rewritten nor counted"


def test_lr_of_a_name_bound_to_a_keras_optimizer_is_renamed_and_other_lr_left():
    new, notes = migrate("""\
        import tensorflow as tf
        import horovod.tensorflow as hvd
        lr = 0.001
        opt = tf.optimizers.Adam(lr * hvd.size())
        wrapped = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
        def on_state_reset():
            opt.lr.assign(lr * hvd.size())
            wrapped.lr.assign(1.0)
        print(args.lr, config.lr, options.lr)
        def train(optimizer):
            optimizer.lr.assign(0.5)
        """)
    assert "opt.learning_rate.assign(lr * hvd.size())" in new and "wrapped.learning_rate.assign(1.0)" in new
    assert "print(args.lr, config.lr, options.lr)" in new, "an .lr of something that is not an optimizer stays"
    assert "optimizer.lr.assign(0.5)" in new, "a parameter's type is not known: left, with a note"
    (uncertain,) = manual(notes)
    assert uncertain.line == 11 and "optimizer.learning_rate" in uncertain.message
    assert {n.line for n in notes if n.rewritten} == {2, 7, 8}


def test_tf_config_reads_are_listed_and_cluster_resolver_gets_advice():
    _, notes = migrate("""\
        import json, os
        import tensorflow as tf
        os.environ.pop("TF_CONFIG", None)
        os.environ["TF_CONFIG"] = json.dumps({})
        tf_config = json.loads(os.environ["TF_CONFIG"])
        other = os.environ.get("TF_CONFIG") or os.getenv('TF_CONFIG')
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        task_type, task_id = (strategy.cluster_resolver.task_type,
                              strategy.cluster_resolver.task_id)
        """)
    left = manual(notes)
    assert [n.line for n in left] == [5, 6, 6], "reads only; setting or removing TF_CONFIG is harmless"
    assert all("tfring.size()" in n.message and "tfring.rank()" in n.message for n in left)
    advice = [n for n in notes if n.advice]
    assert [n.line for n in advice] == [8, 9] and "task_id is tfring.rank()" in advice[0].message


def test_horovod_run_becomes_tfring_run():
    new, notes = migrate("""\
        import sys

        import horovod
        import horovod.tensorflow.keras as hvd

        def main():
            hvd.init()

        if __name__ == '__main__':
            if len(sys.argv) == 4:
                horovod.run(main, np=int(sys.argv[1]), hosts=sys.argv[2])
            else:
                main()
        """)
    assert "import tfring\n" in new and "import horovod\n" not in new and "import tfring.keras as hvd" in new
    assert "tfring.run(main, np=int(sys.argv[1]), hosts=sys.argv[2])" in new
    assert not manual(notes)
    # `from horovod import run`, a result kept, and horovod.spark.run
    new, notes = migrate("from horovod import run\nimport horovod.spark\nr = run(main, np=2)\n"
                         "s = horovod.spark.run(main, num_proc=2)\n")
    assert new == ("from tfring import run\nimport tfring.spark\nr = run(main, np=2)\n"
                   "s = tfring.spark.run(main, num_proc=2)\n")
    assert not manual(notes)
    # `horovod` used for more than horovod.run: both stay, with what replaces horovod.run
    new, notes = migrate("import horovod\nprint(horovod.__version__)\nx = horovod.run(main, np=2)\n")
    assert new.startswith("import horovod\n") and "horovod.run(main, np=2)" in new
    assert [(n.line, "tfring.run(fn, np=...)" in n.message or "horovod.run (line 3)" in n.message)
            for n in manual(notes)] == [(1, True), (3, True)]


def test_keras_legacy_image_import_moves_to_tf_keras_and_its_uses_are_left():
    new, notes = migrate("""\
        import keras
        from keras.preprocessing.image import ImageDataGenerator, img_to_array
        gen = ImageDataGenerator(rotation_range=8)
        it = keras.preprocessing.image.NumpyArrayIterator(x, y, gen)
        """)
    assert "from tensorflow.keras.preprocessing.image import ImageDataGenerator, img_to_array\n" in new
    assert "gen = ImageDataGenerator(rotation_range=8)" in new
    (left,) = manual(notes)
    assert left.line == 4 and "tf.keras.preprocessing.image.NumpyArrayIterator" in left.message
    assert [n.line for n in notes if n.rewritten] == [2]


def test_variables_call_of_a_tf1_optimizer_is_kept():
    new, notes = migrate("""\
        import tensorflow as tf
        opt = tf.compat.v1.train.AdamOptimizer(0.01)
        keras_opt = tf.keras.optimizers.Adam(0.01)
        a = opt.variables()
        b = keras_opt.variables()
        c = unknown.variables()
        """)
    assert "a = opt.variables()" in new and "b = keras_opt.variables\n" in new
    assert "c = unknown.variables()" in new, "in a TF1 script an object of unknown type keeps the call"
    (left,) = manual(notes)
    assert left.line == 6 and "TF1 optimizer keeps .variables()" in left.message
    new, _ = migrate("import tensorflow as tf\nc = unknown.variables()\n")
    assert "c = unknown.variables\n" in new, "a TF2 script: Keras 3's property"


def test_tf1_names_are_listed_with_a_fix_that_works_under_keras3():
    _, notes = migrate("""\
        import tensorflow as tf
        tf.enable_eager_execution()
        opt = tf.train.AdamOptimizer(0.001)
        step = tf.train.get_or_create_global_step()
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        keras_loss = tf.losses.SparseCategoricalCrossentropy()
        h = tf.layers.dense(x, 10)
        tf.app.run(main)
        ckpt = tf.train.Checkpoint(model=model)
        """)
    left = {n.line: n.message for n in manual(notes)}
    assert sorted(left) == [2, 3, 4, 5, 7, 8], "TF 2 names (tf.losses.SparseCategoricalCrossentropy, " \
                                               "tf.train.Checkpoint) are not listed"
    assert "delete the line" in left[2]
    assert "keras.optimizers" in left[3] and "tf.compat.v1.train.AdamOptimizer" in left[3]
    assert "tf.compat.v1.train.get_or_create_global_step" in left[4]
    assert "keras.losses" in left[5] and "tf.compat.v1.losses.sparse_softmax_cross_entropy" in left[5]
    assert "fails under Keras 3" in left[7] and "keras.layers" in left[7]
    assert "main() directly" in left[8]


def test_backend_get_and_set_value_become_variable_methods():
    new, notes = migrate("""\
        import tensorflow as tf
        from tensorflow.keras import backend as K
        tf.keras.backend.set_value(state.model.optimizer.lr,  0.001 * hvd.size())
        print(K.get_value(model.optimizer.lr))
        K.set_value(a + b, 1)
        K.set_value(v, value=3)
        """)
    assert new == textwrap.dedent("""\
        import tensorflow as tf
        from tensorflow.keras import backend as K
        state.model.optimizer.learning_rate.assign(0.001 * hvd.size())
        print(model.optimizer.learning_rate.numpy())
        (a + b).assign(1)
        K.set_value(v, value=3)
        """)
    (left,) = manual(notes)
    assert left.line == 6 and "v.assign(value)" in left.message, "a keyword call is left, with the fix"


def test_tf1_name_table_matches_the_installed_tensorflow():
    import tensorflow as tf

    from tfring._migrate import tf1_names

    def only_v1(v1, v2):
        return {n for n in dir(v1) if not n.startswith("_") and not hasattr(v2, n)}

    assert tf1_names.ROOT == only_v1(tf.compat.v1, tf)
    assert tf1_names.TRAIN == only_v1(tf.compat.v1.train, tf.train)
    assert tf1_names.LOSSES == only_v1(tf.compat.v1.losses, tf.losses)


def test_import_tfring_goes_with_the_imports_not_after_code():
    new, _ = migrate("""\
        \'\'\'Doc.\'\'\'
        import os
        import tensorflow as tf
        print(tf.__version__)
        import json
        strategy = tf.distribute.MirroredStrategy()
        """)
    assert new == textwrap.dedent("""\
        \'\'\'Doc.\'\'\'
        import os
        import tensorflow as tf
        import tfring
        print(tf.__version__)
        import json
        strategy = tfring.RingStrategy()
        """)


@pytest.mark.parametrize("line, expected, left", [
    ("horovodrun -np 4 python train.py --lr 0.1\n", "tfringrun -np 4 python train.py --lr 0.1\n", 0),
    ("  horovodrun --num-proc=2 --gloo -p 2222 -i key --verbose python x.py",
     "  tfringrun -np 2 --ssh-port 2222 --ssh-identity-file key --verbose python x.py", 0),
    ("horovodrun -np 2 --log-level FATAL --stall-check-warning-time-seconds 5 python x.py",
     "tfringrun -np 2 --log-level fatal --stall-warning-s 5 python x.py", 0),
    ("horovodrun -np 2 -x PATH python x.py", "horovodrun -np 2 -x PATH python x.py", 1),
    ("horovodrun -np 2 --made-up python x.py", "horovodrun -np 2 --made-up python x.py", 1),
    ("horovodrun -np", "horovodrun -np", 1),
])
def test_launcher_lines(line, expected, left):
    new, notes = text_rules.rewrite_launcher_line(line)
    assert new == expected
    assert len(manual(notes)) == left


def test_every_rewritten_launcher_option_exists_in_tfringrun():
    from tfring._runner import args as launcher_args

    known = set()
    for action in launcher_args.build_parser()._actions:
        known.update(action.option_strings)
    targets = {new for _, new in rules.LAUNCHER_OPTIONS.values() if new is not None}
    assert targets <= known, targets - known


def test_every_tfring_variable_named_exists_in_the_core():
    import tfring

    names = {row["name"] for row in tfring.config_table()}
    targets = {v for v in rules.ENVIRONMENT.values() if v is not None}
    assert targets <= names, targets - names
    assert set(rules.ENVIRONMENT_REASONS) == {k for k, v in rules.ENVIRONMENT.items() if v is None}


def test_the_migration_guide_lists_every_variable_and_option():
    with open(os.path.join(REPO_ROOT, "docs", "migrating.md")) as f:
        guide = f.read()
    missing = [name for name in [*rules.ENVIRONMENT, *rules.LAUNCHER_OPTIONS, *rules.LAUNCHER_UNSUPPORTED_OPTIONS]
               if f"`{name}`" not in guide]
    assert not missing, f"docs/migrating.md does not mention {missing}"


# ---- the command ------------------------------------------------------------------------

def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tfring._migrate.cli", *args], cwd=cwd, env=job_env(),
                          capture_output=True, text=True, timeout=60, check=False)


def test_cli_prints_a_diff_and_writes_nothing_without_write(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import horovod.keras as hvd\nopt = Adam(lr=1)\n")
    result = run_cli("train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "-import horovod.keras as hvd\n-opt = Adam(lr=1)\n+import tfring.keras as hvd\n" in result.stdout
    assert "train.py:2: rewritten: Adam(lr=) -> Adam(learning_rate=)" in result.stderr
    assert "would change 1 of 1 file(s); 0 manual edit(s) left" in result.stderr
    assert script.read_text() == "import horovod.keras as hvd\nopt = Adam(lr=1)\n"


def test_cli_write_changes_files_and_exits_1_while_manual_edits_remain(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "train.py").write_text("import tensorflow as tf\nimport horovod.tensorflow as hvd\ns = tf.Session()\n")
    (tmp_path / "jobs" / "run.sh").write_text("export HOROVOD_CYCLE_TIME=2\nhorovodrun -np 2 python train.py\n")
    result = run_cli("--write", "--quiet", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert (tmp_path / "train.py").read_text() == "import tensorflow as tf\nimport tfring.tensorflow as hvd\ns = tf.Session()\n"
    assert (tmp_path / "jobs" / "run.sh").read_text() == "export TFRING_CYCLE_TIME_MS=2\ntfringrun -np 2 python train.py\n"
    assert "./train.py:3: manual: tf.Session" in result.stderr
    assert "rewritten" not in result.stderr, "--quiet lists only the manual edits"
    assert "changed 2 of 2 file(s); 1 manual edit(s) left" in result.stderr


def test_cli_prints_advice_as_notes_that_do_not_count_as_manual_edits(tmp_path):
    (tmp_path / "train.py").write_text("import tensorflow as tf\ns = tf.distribute.MultiWorkerMirroredStrategy()\n"
                                       "print(s.cluster_resolver.task_id)\n")
    result = run_cli("--quiet", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py:3: note: cluster_resolver.task_id: under tfring.RingStrategy" in result.stderr
    assert "0 manual edit(s) left" in result.stderr


def test_cli_refuses_a_file_that_is_not_python_and_writes_nothing(tmp_path):
    (tmp_path / "a.py").write_text("import horovod.keras as hvd\n")
    (tmp_path / "b.py").write_text("def broken(:\n")
    result = run_cli("--write", "a.py", "b.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "b.py is not valid Python" in result.stderr and "nothing was changed" in result.stderr
    assert (tmp_path / "a.py").read_text() == "import horovod.keras as hvd\n"


def test_cli_is_installed_as_a_command():
    assert cli.build_parser().prog == "tfring-migrate"
    with open(os.path.join(REPO_ROOT, "setup.py")) as f:
        assert "tfring-migrate = tfring.migrate:main" in f.read()


def test_init_warns_about_horovod_settings_tfring_ignores():
    from tfring._basics import horovod_settings

    environ = {"HOROVOD_FUSION_THRESHOLD": "1", "HOROVOD_AUTOTUNE": "1", "HOROVOD_RANK": "0",
               "HOROVOD_CYCLE_TIME": "2", "TFRING_CYCLE_TIME_MS": "2"}
    assert horovod_settings.ignored(environ) == [
        ("HOROVOD_AUTOTUNE", "set TFRING_AUTOTUNE instead"),
        ("HOROVOD_FUSION_THRESHOLD", "set TFRING_FUSION_THRESHOLD instead"),
    ], "identity variables and settings already given their tfring name are not reported"
    script = "import tfring, warnings\nwarnings.simplefilter('always')\ntfring.init()\ntfring.shutdown()\n"
    result = subprocess.run([sys.executable, "-c", script], env=job_env({"HOROVOD_FUSION_THRESHOLD": "64"}),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert ("tfring ignores these Horovod settings in the environment: HOROVOD_FUSION_THRESHOLD "
            "(set TFRING_FUSION_THRESHOLD instead)") in result.stderr


# ---------------------------------------------------------------- issue 40: wrong rewrites, misses


def test_generator_methods_pass_positional_arguments_by_their_keras2_names():
    new, notes = migrate("""\
        model.evaluate_generator(gen, len(gen), workers=4)
        model.fit_generator(generator=gen, steps_per_epoch=3)
        model.predict_generator(gen, 5, None, 10, 4, True, 0)
        model.fit_generator(*args)
        """)
    assert new == textwrap.dedent("""\
        model.evaluate(gen, steps=len(gen))
        model.fit(x=gen, steps_per_epoch=3)
        model.predict(gen, steps=5, callbacks=None, verbose=0)
        model.fit(*args)
        """), "Keras 3 would read evaluate(gen, len(gen))'s second argument as y"
    assert [n.line for n in manual(notes)] == [4]
    assert any("workers" in n.message and n.line == 1 and n.rewritten for n in notes)


def test_every_module_rewrite_target_exists():
    import importlib

    pytest.importorskip("tensorflow")  # tfring.tensorflow and tfring.keras load it
    for target in sorted(set(rules.MODULES.values())):
        importlib.import_module(target)  # a rewrite to a module tfring lacks fails here
        assert target in python_source.tfring_modules(), target


def test_horovod_modules_tfring_lacks_are_listed_not_rewritten():
    source = textwrap.dedent("""\
        from horovod.tensorflow.data.other_service import TfDataServiceConfig
        import horovod.tensorflow.data.other_service
        from horovod.tensorflow import data
        import horovod.tensorflow.no_such_module
        from horovod.runner.common.util import env
        import horovod.tensorflow.mpi_ops
        """)
    new, notes = python_source.rewrite(source)
    assert new == source.replace("import horovod.tensorflow.mpi_ops", "import tfring.tensorflow")
    by_line = {n.line: n for n in notes}
    assert [n.line for n in manual(notes)] == [1, 2, 3, 4, 5]
    for line in (1, 2, 3):
        assert "tfring.tensorflow.data.compute_service" in by_line[line].message
    assert "tfring has no module tfring.tensorflow.no_such_module" in by_line[4].message
    # the advice must work before init(): the environment, not tfring.tensorflow / tfring.keras
    assert "os.environ['TFRING_RANK']" in by_line[5].message and "tfring.keras" not in by_line[5].message


def test_a_longer_module_rule_overrides_an_unsupported_parent(monkeypatch):
    """How the other launch paths add their rewrite: one MODULES row, longer than the
    unsupported row of its package."""
    monkeypatch.setitem(rules.MODULES, "horovod.tensorflow.data.compute_service", "tfring.tensorflow")
    new, _ = migrate("from horovod.tensorflow.data.compute_service import TfDataServiceConfig\n")
    assert new == "from tfring.tensorflow import TfDataServiceConfig\n"
    assert python_source.module_rule("horovod.tensorflow.data.other")[1] is not None


def test_keras3_saving_that_fails_in_one_process_is_listed_with_its_replacement():
    _, notes = migrate("""\
        import os
        import tensorflow as tf
        import tensorflow_hub as hub
        import horovod.tensorflow.keras as hvd
        saved_model_path = "/tmp/tf_save"
        model.save(saved_model_path)
        model.save("/tmp/keras_save.keras")
        model.save(os.path.join(d, "model.keras"), options=opts)
        ckpt = tf.train.Checkpoint(model=model)
        ckpt.save("/tmp/ckpt")
        tf.keras.models.load_model(saved_model_path, options=opts)
        sig = model.save_spec()
        layer = hub.KerasLayer(loaded, trainable=True)
        model = hvd.load_model(args.checkpoint_format.format(epoch=resume_from_epoch))
        parser.add_argument("--checkpoint-format", default="./checkpoint-{epoch}.h5")
        tf.keras.models.save_model(model, "/tmp/dir")
        try:
            my_model.save(saved_model_path)
        except ValueError as e:
            print(*e.args)
        """)
    found = {(n.line, n.message.split(":")[0]) for n in manual(notes)}
    assert found == {
        (6, "save to '/tmp/tf_save'"), (8, "save(options=...)"), (11, "load_model(options=...)"),
        (12, ".save_spec()"), (13, "hub.KerasLayer"), (14, "load_model"), (16, "save to '/tmp/dir'")}, found
    (expected_failure,) = [n for n in notes if n.line == 18]
    assert expected_failure.advice and "inside `except ValueError`" in expected_failure.message
    text = " ".join(n.message for n in notes)
    for replacement in ("model.export", "tf.saved_model.save", "keras.layers.TFSMLayer", ".keras"):
        assert replacement in text


def test_strategy_notes_speak_of_tf_config_only_where_it_is_used():
    _, notes = migrate("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n")
    assert "TF_CONFIG" not in notes[0].message and "one process per GPU" in notes[0].message
    _, notes = migrate("import tensorflow as tf\ns = tf.distribute.MultiWorkerMirroredStrategy()\n")
    assert "replaces TF_CONFIG" in notes[0].message
    _, notes = migrate("import os, tensorflow as tf\nc = os.environ['TF_CONFIG']\n"
                       "s = tf.distribute.MirroredStrategy()\n")
    assert any("replaces TF_CONFIG" in n.message for n in notes)


def test_horovod_data_service_and_spark_launch_lines_are_rewritten():
    new, notes = text_rules.rewrite_launcher_line(
        "horovodrun -np 2 python -m horovod.tensorflow.data.compute_worker /tmp/compute.json\n")
    assert new == "tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /tmp/compute.json\n"
    assert all(n.rewritten for n in notes) and len(notes) == 2
    new, notes = migrate("""\
        from horovod.tensorflow.compute_service import TfDataServiceConfig
        from horovod.tensorflow.data.compute_service import tf_data_service, compute_worker_fn
        """)
    assert new == ("from tfring.tensorflow.data.compute_service import TfDataServiceConfig\n"
                   "from tfring.tensorflow.data.compute_service import tf_data_service, compute_worker_fn\n")
    assert not manual(notes)


# ---- Ray, module names in shell scripts ---------------------------------------------------

def test_horovod_ray_becomes_tfring_ray_and_what_it_lacks_is_listed():
    new, notes = migrate("""\
        from horovod.ray import RayExecutor
        import horovod.ray
        ex = horovod.ray.RayExecutor(settings, num_workers=2)
        from horovod.ray import ElasticRayExecutor
        settings = RayExecutor.create_settings(timeout_s=30)
        """)
    assert new.splitlines()[:3] == ["from tfring.ray import RayExecutor", "import tfring.ray",
                                    "ex = tfring.ray.RayExecutor(settings, num_workers=2)"]
    assert "from horovod.ray import ElasticRayExecutor" in new
    assert new.splitlines()[4] == "settings = RayExecutor.create_settings(timeout_s=30)"  # tfring's has it
    assert [n.line for n in manual(notes)] == [4]
    assert "TfringTrainer" in manual(notes)[0].message
    assert not any("no Ray runner" in n.message for n in notes)


def test_horovod_spark_compute_worker_becomes_tfring_spark_compute_worker():
    new, notes = migrate("import horovod.spark.tensorflow.compute_worker as worker\n"
                         "from horovod.spark.tensorflow import compute_worker\n"
                         "import horovod.spark.tensorflow.other\n")
    assert new.splitlines() == ["import tfring.spark.compute_worker as worker",
                                "from tfring.spark import compute_worker",
                                "import horovod.spark.tensorflow.other"]  # no tfring.spark.tensorflow
    other, = manual(notes)
    assert other.line == 3 and "there is no tfring.spark.tensorflow" in other.message
    assert "python -m tfring.spark.compute_worker" in other.message


def test_shell_scripts_rewrite_or_list_the_horovod_modules_they_name(tmp_path):
    script = ('python -c "import horovod.spark.tensorflow.compute_worker as w; print(w.__file__)"\n'
              "python -m horovod.spark.tensorflow.compute_worker /tmp/c.json --dispatchers-nic eth0\n"
              "mpirun -np 2 python -m horovod.tensorflow.data.compute_worker /tmp/c.json\n"
              'python -c "import horovod.torch"\n')
    new, notes = text_rules.rewrite_file(script)
    assert new == script.replace("horovod.tensorflow.data", "tfring.tensorflow.data").replace(
        "horovod.spark.tensorflow.compute_worker", "tfring.spark.compute_worker")
    assert [(n.line, n.manual) for n in notes] == [(1, False), (2, False), (3, False), (4, True)]
    assert "horovod.spark.tensorflow.compute_worker -> tfring.spark.compute_worker" in notes[0].message
    (tmp_path / "start_compute.sh").write_text(script)
    result = run_cli("--quiet", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "./start_compute.sh:4: manual: horovod.torch: " in result.stderr
    assert "1 manual edit(s) left" in result.stderr


# ---- notebooks ----------------------------------------------------------------------------

def notebook_json(*cells):
    """A notebook as Jupyter writes it: (cell_type, source) pairs, sources as line lists."""
    import json

    def cell(kind, source):
        c = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
        if kind == "code":
            c.update(execution_count=None, outputs=[])
        return dict(sorted(c.items()))

    nb = {"cells": [cell(*c) for c in cells], "metadata": {"kernelspec": {"name": "python3"}},
          "nbformat": 4, "nbformat_minor": 4}
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


NOTEBOOK_CELLS = (
    ("markdown", "# Training with horovod.tensorflow.keras (é)\n"),
    ("code", ("%matplotlib inline\n!pip install horovod\nimport horovod.tensorflow.keras as hvd\n"
              "opt = keras.optimizers.Adam(lr=0.1)")),
    ("code", "%%bash\nhorovodrun -np 2 python train.py"),
    ("code", ("for i in range(2):\n    %time step(i)\nfiles = !ls\nprint(opt.lr)\n"
              "!horovodrun -np 2 python train.py\nimport tensorflow as tf; tf.Session()")),
)


@pytest.mark.parametrize("reader", ["nbformat", "json"])
def test_notebook_code_cells_are_rewritten_and_ipython_lines_kept(monkeypatch, reader):
    import json

    from tfring._migrate import notebook

    if reader == "json":
        monkeypatch.setattr(notebook, "_nbformat", lambda: None)
    else:
        pytest.importorskip("nbformat")
    text = notebook_json(*NOTEBOOK_CELLS)
    new, notes = notebook.rewrite(text)
    assert new.endswith("}\n") and new.startswith('{\n "cells": [\n  {\n   "cell_type"'), "Jupyter's layout"
    cells = [("".join(c["source"])) for c in json.loads(new)["cells"]]
    assert cells[0] == NOTEBOOK_CELLS[0][1] and cells[2] == NOTEBOOK_CELLS[2][1], "markdown and %% cells kept"
    assert cells[1] == ("%matplotlib inline\n!pip install horovod\nimport tfring.keras as hvd\n"
                        "opt = keras.optimizers.Adam(learning_rate=0.1)")
    assert cells[3] == NOTEBOOK_CELLS[3][1].replace("opt.lr", "opt.learning_rate"), "opt is known from cell 2"
    assert new == notebook_json(NOTEBOOK_CELLS[0], ("code", cells[1]), NOTEBOOK_CELLS[2], ("code", cells[3]))
    assert [(n.cell, n.line, n.manual) for n in notes] == [
        (2, 3, False), (2, 4, False), (4, 4, False), (4, 5, True), (4, 6, True)]
    assert "`!tfringrun -np 2 python train.py`" in notes[3].message
    assert notes[4].where("nb.ipynb") == "nb.ipynb cell 4, line 6"
    unchanged = notebook_json(("code", "import tensorflow as tf\n%time x = 1\n"))
    assert notebook.rewrite(unchanged) == (unchanged, [])


def test_cli_rewrites_the_notebooks_of_a_folder_and_names_their_cells(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "train.ipynb").write_text(notebook_json(*NOTEBOOK_CELLS))
    (tmp_path / "notebooks" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "notebooks" / ".ipynb_checkpoints" / "train-checkpoint.ipynb").write_text("{}")
    result = run_cli("--write", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "./notebooks/train.ipynb cell 4, line 6: manual: tf.Session" in result.stderr
    assert "./notebooks/train.ipynb cell 2, line 3: rewritten: import horovod.tensorflow.keras" in result.stderr
    assert "changed 1 of 1 file(s); 2 manual edit(s) left" in result.stderr
    assert "import tfring.keras as hvd" in (tmp_path / "notebooks" / "train.ipynb").read_text()
    assert "notebooks" in cli.build_parser().format_help()


def test_cli_refuses_a_notebook_whose_cell_is_not_python(tmp_path):
    source = notebook_json(("code", "import horovod.keras as hvd\n"), ("code", "def broken(:\n"))
    (tmp_path / "a.ipynb").write_text(source)
    (tmp_path / "b.ipynb").write_text("not json")
    result = run_cli("--write", "a.ipynb", cwd=tmp_path)
    assert result.returncode == 2 and "a.ipynb: cell 2 is not valid Python" in result.stderr, result.stderr
    assert (tmp_path / "a.ipynb").read_text() == source
    result = run_cli("b.ipynb", cwd=tmp_path)
    assert result.returncode == 2 and "not a notebook" in result.stderr, result.stderr


# ---- Keras 3 failures: save paths, monitored metrics, file objects -------------------------

def test_save_paths_held_in_names_and_checkpoint_paths_without_their_suffix_are_listed():
    _, notes = migrate("""\
        import os
        import keras
        SAVE_DIR = "/tmp/run"
        ckpt = os.path.join(SAVE_DIR, "ckpt-{epoch}")
        def train(model):
            out = f"{SAVE_DIR}/final"
            model.save(out)
            model.save(os.path.join(SAVE_DIR, "ok.keras"))
            model.save_weights("/tmp/w.h5")
            model.save("m.hdf5")
            keras.callbacks.ModelCheckpoint(ckpt)
            keras.callbacks.ModelCheckpoint(SAVE_DIR + "/w-{epoch}.h5", save_weights_only=True)
            keras.callbacks.ModelCheckpoint("ckpt-{epoch}.keras")
            model.save("model-{}".format(3))
            model.save("model-{}.keras".format(3))
        """)
    found = {(n.line, n.message.split(":")[0]) for n in manual(notes)}
    assert found == {(7, "save to '/final'"), (9, "save to '/tmp/w.h5'"), (11, "save to 'ckpt-{epoch}'"),
                     (12, "save to '/w-{epoch}.h5'")}, found
    by_line = {n.line: n.message for n in notes}
    assert "'<name>.weights.h5'" in by_line[9] and "'checkpoint-{epoch}.keras'" in by_line[11]
    assert "'checkpoint-{epoch}.weights.h5'" in by_line[12]


def test_monitored_metrics_keras3_cannot_tell_the_direction_of_are_listed():
    _, notes = migrate("""\
        import keras
        from keras.callbacks import EarlyStopping, ReduceLROnPlateau
        ReduceLROnPlateau(monitor="val_f1", factor=0.5)
        ReduceLROnPlateau(monitor="val_accuracy")
        ReduceLROnPlateau("val_f1", 0.1, 10, 0, "max")
        EarlyStopping(monitor="val_f1", mode="max")
        EarlyStopping(monitor="dense_loss")
        EarlyStopping()
        keras.callbacks.ModelCheckpoint("best.keras", monitor="val_iou", save_best_only=True)
        keras.callbacks.ModelCheckpoint("best.keras", "val_mae")
        """)
    assert [n.line for n in manual(notes)] == [3, 7, 9]
    message = manual(notes)[0].message
    assert message.startswith("ReduceLROnPlateau(monitor='val_f1'): without mode=")
    assert "raises ValueError at the end of the first epoch" in message and "mode='max'" in message


def test_keras3_infers_the_direction_of_every_metric_name_the_rule_trusts():
    """Each name of rules.KERAS_DIRECTED_METRICS, compiled as a metric, passes Keras 3's own
    mode="auto" check (MonitorCallback._set_monitor_op), and a custom metric does not."""
    keras = pytest.importorskip("keras")
    import numpy as np

    def set_monitor_op(metric, monitor):
        sparse = "sparse" in str(metric)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(loss="sparse_categorical_crossentropy" if sparse else "categorical_crossentropy",
                      metrics=[metric])
        y = np.array([0, 1, 1, 0]) if sparse else np.eye(2)[[0, 1, 1, 0]].astype("float32")
        model.evaluate(np.ones((4, 3), "float32"), y, verbose=0)  # builds the compiled metrics
        callback = keras.callbacks.ReduceLROnPlateau(monitor=monitor)
        callback.set_model(model)
        callback._set_monitor_op()

    for name in sorted(rules.KERAS_DIRECTED_METRICS - {"loss"}):
        set_monitor_op(name, "val_" + name)

    def f1(y_true, y_pred):
        return keras.ops.mean(y_pred)

    with pytest.raises(ValueError, match="automatically determine"):
        set_monitor_op(f1, "val_f1")


def test_saving_into_an_open_file_is_listed():
    _, notes = migrate("""\
        import h5py
        model.save(h5py.File("/tmp/m.h5", "w"))
        with h5py.File("/tmp/n.h5", "w") as f:
            model.save_weights(f)
        with open("/tmp/m.keras", "wb") as g:
            model.save(g)
        """)
    assert [n.line for n in manual(notes)] == [2, 4, 6]
    assert all("take a path, not an open file" in n.message and "model.save('model.keras')" in n.message
               for n in notes)


def test_horovod_autotuning_maps_to_tfrings_autotuner():
    new, notes = python_source.rewrite(textwrap.dedent('''\
        """Run: horovodrun -np 2 --autotune --autotune-log-file at.csv python train.py"""
        import os
        os.environ["HOROVOD_AUTOTUNE"] = "1"
        os.environ["HOROVOD_AUTOTUNE_LOG"] = "at.csv"
        os.environ["HOROVOD_AUTOTUNE_WARMUP_SAMPLES"] = "2"
        os.environ["HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"] = "5"
        os.environ["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] = "12"
        '''))
    assert new == textwrap.dedent('''\
        """Run: tfringrun -np 2 --autotune --autotune-log-file at.csv python train.py"""
        import os
        os.environ["TFRING_AUTOTUNE"] = "1"
        os.environ["TFRING_AUTOTUNE_LOG"] = "at.csv"
        os.environ["TFRING_AUTOTUNE_WARMUP_SAMPLES"] = "2"
        os.environ["TFRING_AUTOTUNE_STEPS_PER_SAMPLE"] = "5"
        os.environ["TFRING_AUTOTUNE_MAX_SAMPLES"] = "12"
        ''')
    assert manual(notes) == []
