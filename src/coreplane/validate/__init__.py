"""Validation of the speedup models against real runs (`coreplane validate`): suites, calibration, runs, errors.

Python API:

    from coreplane.validate import engine, suite
    result = engine.validate(suite.load("quick"), "target/validate", engine.Options(quick=True))
    result["mape"]          # MAPE per model, with estimated and with fitted γ
"""
