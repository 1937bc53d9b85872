#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: set up (packages), build
# the asan preset into build-asan/ and run the tests there (CUDA off: nothing to sanitise without
# a GPU). Extra arguments go to ctest.
#
# Left to the release suite (scripts/test.sh runs them): tests whose cost is the volume of
# training. They take 25-270 s each under ASan, a third of the sanitised suite's time, and
# smaller tests run the same code: compression's rounding and bytes (Compression.*), checkpoint
# and resume (SimResume.*, MpiResume.*, CheckpointRefusal.*, MpiKilledRank.*), a thousand
# simulated workers (Trace.ThousandWorker...), PowerSGD at low rank (PowerSgd.SimAndMpiAgree...),
# the regression datasets (RegressionBadInput.*, Trainer.RegressionWithMse), a SIGTERM's stop at a
# step and its resume (StopSignal.LocalStopsAtTheStepAndResumes, StopSignal.Sim*,
# StopSignal.MpiRanksStopAt*: the process signals itself, so the handler and the ranks' stop latch
# run sanitised too). Also the validation scripts' runs end to end (Validation.Script*,
# Validation.ADoctored*, Validation.Calibrate*, ValidationTargets.*, Collectives.ADoctored*):
# 165 s under ASan before the last three were added (Validation.CalibratePair* alone took 177 s),
# mostly measured runs and calibration; their commands run sanitised in the tests of calibrate,
# compare and collectives.
set -euo pipefail
cd "$(dirname "$0")/.."
training_volume=(
  Compression.FmnistMlpAccuracyStaysCloseToFp32  # 3 x 3 epochs of Fashion-MNIST
  StopSignal.SigtermStopsAtTheNextStepAndResumes  # 3 epochs of 1,500 steps, local backend
  StopSignal.SigusrToMpirunStopsEveryRankAtOneStepAndResumes  # 3 x 3 epochs of 750 steps, MPI
  Scale.FourThousandGpuDdpEpochCompletesWithRingVolumes
  PowerSgd.FullRankIsUncompressedDdpUpToRounding
  PaperRegression.TrainingLossFallsAndTestR2Rises
  Validation.ScriptComparesEveryPairAndWritesTheTable
  Validation.ADoctoredPlatformMissesTheTargets
  Validation.CalibratePairCalibratesBeforeEachPair
  Validation.CalibrateRunCalibratesBeforeEachMeasuredRun
  Validation.CalibratesAgainWhileCalibrateWarns
  ValidationTargets.ReducedValidationMeetsItsTargets
  ValidationTargets.ReducedCollectivesMeetTheirTarget
  Collectives.ADoctoredPlatformMissesTheTarget
)
exclude="^($(IFS='|'; echo "${training_volume[*]}"))\$"
scripts/setup.sh
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)"
ctest --preset asan -j "$(nproc)" -E "$exclude" "$@"
